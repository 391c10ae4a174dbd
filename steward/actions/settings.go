package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/agentstack/agentstack/steward/audit"
)

// Settings are the Action Center's controls, stored in actions.db metadata
// (spec: "Action Settings And Calendar Reminders").
type Settings struct {
	Enabled         bool   `json:"enabled"`
	CalendarEnabled bool   `json:"calendarEnabled"`
	TextLanguage    string `json:"textLanguage"` // default, en or it
	// Cutoffs recorded by the server, Unix seconds; nil until changed.
	EnabledAt         *int64 `json:"enabledAt"`
	CalendarEnabledAt *int64 `json:"calendarEnabledAt"`
	UpdatedAt         *int64 `json:"updatedAt"`
}

// SettingsUpdate is a partial update of the three editable fields.
type SettingsUpdate struct {
	Enabled         *bool   `json:"enabled,omitempty"`
	CalendarEnabled *bool   `json:"calendarEnabled,omitempty"`
	TextLanguage    *string `json:"textLanguage,omitempty"`
}

// Languages accepted by textLanguage.
var Languages = []string{"default", "en", "it"}

const settingsKey = "settings"

// Settings reads the stored settings, with the defaults for a new store.
func (s *Store) Settings(ctx context.Context) (Settings, error) {
	st := Settings{Enabled: true, CalendarEnabled: true, TextLanguage: "default"}
	v, ok, err := s.Meta(ctx, settingsKey)
	if err != nil || !ok {
		return st, err
	}
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return st, fmt.Errorf("decode action settings: %w", err)
	}
	return st, nil
}

// UpdateSettings applies u. Switching enabled false→true records enabledAt
// (mail then considers only messages ingested after it, calendar only events
// modified after it); calendarEnabled false→true records calendarEnabledAt.
// Invalid values are rejected with the field named, and nothing changes.
func (s *Store) UpdateSettings(ctx context.Context, u SettingsUpdate) (Settings, error) {
	if u.TextLanguage != nil && !validLanguage(*u.TextLanguage) {
		return Settings{}, fmt.Errorf("textLanguage: %q is not one of default, en, it", *u.TextLanguage)
	}
	st, err := s.Settings(ctx)
	if err != nil {
		return st, err
	}
	now := s.opts.Now().Unix()
	if u.Enabled != nil {
		if *u.Enabled && !st.Enabled {
			st.EnabledAt = &now
		}
		st.Enabled = *u.Enabled
	}
	if u.CalendarEnabled != nil {
		if *u.CalendarEnabled && !st.CalendarEnabled {
			st.CalendarEnabledAt = &now
		}
		st.CalendarEnabled = *u.CalendarEnabled
	}
	if u.TextLanguage != nil {
		st.TextLanguage = *u.TextLanguage
	}
	st.UpdatedAt = &now
	b, _ := json.Marshal(st)
	if err := s.SetMeta(ctx, settingsKey, string(b)); err != nil {
		return st, err
	}
	s.audit(ctx, "action.settings", "Action Center settings changed", audit.RiskLow, st)
	return st, nil
}

func validLanguage(l string) bool {
	for _, v := range Languages {
		if v == l {
			return true
		}
	}
	return false
}

// MailCutoff is the ingestion time before which mail is not considered
// (zero: none).
func (st Settings) MailCutoff() time.Time { return unixOrZero(st.EnabledAt) }

// CalendarCutoff is the modification time before which calendar entries are
// not considered: the later of the global and the calendar-only cutoff.
func (st Settings) CalendarCutoff() time.Time {
	g, c := unixOrZero(st.EnabledAt), unixOrZero(st.CalendarEnabledAt)
	if c.After(g) {
		return c
	}
	return g
}

func unixOrZero(p *int64) time.Time {
	if p == nil {
		return time.Time{}
	}
	return time.Unix(*p, 0)
}

// SettingsHandler serves GET and POST /settings/actions. The host mounts it
// behind its authentication; POST is a direct user setting, not a tool call.
func SettingsHandler(open func(ctx context.Context) (*Store, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		store, err := open(r.Context())
		if err != nil {
			http.Error(w, "open the action store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		var st Settings
		switch r.Method {
		case http.MethodGet:
			st, err = store.Settings(r.Context())
		case http.MethodPost:
			var u SettingsUpdate
			if u, err = decodeUpdate(r.Body); err != nil {
				writeJSONError(w, http.StatusBadRequest, err)
				return
			}
			if st, err = store.UpdateSettings(r.Context(), u); err != nil && !errors.Is(err, context.Canceled) {
				writeJSONError(w, http.StatusBadRequest, err)
				return
			}
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err != nil {
			writeJSONError(w, http.StatusInternalServerError, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
}

// decodeUpdate parses a POST body strictly: unknown fields and values of the
// wrong type are rejected with the field named.
func decodeUpdate(body io.Reader) (SettingsUpdate, error) {
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(io.LimitReader(body, 1<<16)).Decode(&raw); err != nil {
		return SettingsUpdate{}, fmt.Errorf("the body is not a JSON object: %w", err)
	}
	var u SettingsUpdate
	for k, v := range raw {
		var err error
		switch k {
		case "enabled":
			u.Enabled, err = decodeBool(v)
		case "calendarEnabled":
			u.CalendarEnabled, err = decodeBool(v)
		case "textLanguage":
			var l string
			if err = json.Unmarshal(v, &l); err == nil {
				if !validLanguage(l) {
					err = fmt.Errorf("%q is not one of default, en, it", l)
				}
				u.TextLanguage = &l
			}
		case "enabledAt", "calendarEnabledAt", "updatedAt":
			err = errors.New("is recorded by the server and cannot be set")
		default:
			err = errors.New("is not a setting (enabled, calendarEnabled, textLanguage)")
		}
		if err != nil {
			return SettingsUpdate{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	return u, nil
}

func decodeBool(v json.RawMessage) (*bool, error) {
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return nil, fmt.Errorf("%s is not true or false", strconv.Quote(string(v)))
	}
	return &b, nil
}

func writeJSONError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
