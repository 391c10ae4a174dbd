package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestSettingsRoute(t *testing.T) {
	s, _ := openTestStore(t)
	srv := httptest.NewServer(SettingsHandler(func(context.Context) (*Store, error) { return s, nil }))
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st["enabled"] != true || st["calendarEnabled"] != true || st["textLanguage"] != "default" || st["enabledAt"] != nil || st["updatedAt"] != nil {
		t.Fatalf("defaults: %v", st)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"textLanguage":"fr"}`, "textLanguage"},
		{`{"enabled":"yes"}`, "enabled"},
		{`{"calendarEnabled":1}`, "calendarEnabled"},
		{`{"enabledAt":5}`, "enabledAt"},
		{`{"colour":"red"}`, "colour"},
		{`[1]`, "JSON object"},
	} {
		code, out := post(t, srv.URL, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(out["error"].(string), tc.field) {
			t.Fatalf("%s: %d %v", tc.body, code, out)
		}
	}
	if got, _ := s.Settings(context.Background()); got.UpdatedAt != nil || got.TextLanguage != "default" {
		t.Fatalf("a rejected POST changed the settings: %+v", got)
	}
	// Partial update: only the language changes.
	if code, out := post(t, srv.URL, `{"textLanguage":"it"}`); code != 200 || out["textLanguage"] != "it" || out["enabled"] != true || out["updatedAt"] == nil {
		t.Fatalf("language: %d %v", code, out)
	}
}

func TestSettingsCutoffRules(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	f, tr := false, true
	// Disabling records no cutoff; re-enabling records enabledAt.
	st, _ := s.UpdateSettings(ctx, SettingsUpdate{Enabled: &f})
	if st.EnabledAt != nil || !st.MailCutoff().IsZero() {
		t.Fatalf("disable: %+v", st)
	}
	c.t = c.t.Add(time.Hour)
	st, _ = s.UpdateSettings(ctx, SettingsUpdate{Enabled: &tr})
	global := c.t
	if st.EnabledAt == nil || !st.MailCutoff().Equal(global) || !st.CalendarCutoff().Equal(global) {
		t.Fatalf("global re-enable: %+v", st)
	}
	// Enabling an enabled switch records nothing new.
	c.t = c.t.Add(time.Hour)
	if st, _ = s.UpdateSettings(ctx, SettingsUpdate{Enabled: &tr}); !st.MailCutoff().Equal(global) {
		t.Fatalf("enabled twice moved the cutoff: %+v", st)
	}
	// Calendar-only re-enable: calendar uses the later cutoff, mail keeps the global one.
	s.UpdateSettings(ctx, SettingsUpdate{CalendarEnabled: &f})
	c.t = c.t.Add(time.Hour)
	st, _ = s.UpdateSettings(ctx, SettingsUpdate{CalendarEnabled: &tr})
	if !st.MailCutoff().Equal(global) || !st.CalendarCutoff().Equal(c.t) || st.CalendarEnabledAt == nil {
		t.Fatalf("calendar re-enable: mail %v calendar %v", st.MailCutoff(), st.CalendarCutoff())
	}
	// A later global re-enable wins over the older calendar cutoff.
	s.UpdateSettings(ctx, SettingsUpdate{Enabled: &f})
	c.t = c.t.Add(time.Hour)
	st, _ = s.UpdateSettings(ctx, SettingsUpdate{Enabled: &tr})
	if !st.CalendarCutoff().Equal(c.t) || !st.MailCutoff().Equal(c.t) {
		t.Fatalf("second global re-enable: %+v", st)
	}
}

func TestItemRoutes(t *testing.T) {
	s, c := openTestStore(t)
	id, _, _ := s.Upsert(context.Background(), testMailItem(1, c.t), false)
	mux := http.NewServeMux()
	Mount(mux.Handle, func(context.Context) (*Store, error) { return s, nil })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		method, path, body string
		code               int
	}{
		{"GET", "/actions/abc", "", 400},
		{"GET", "/actions/999", "", 404},
		{"POST", "/actions/999/status", `{"status":"done"}`, 404},
		{"POST", fmt.Sprintf("/actions/%d/status", id), `{"status":"closed"}`, 400},
		{"GET", fmt.Sprintf("/actions/%d?select=1", id), "", 200},
		{"POST", fmt.Sprintf("/actions/%d/status", id), `{"status":"dismissed"}`, 200},
		{"GET", "/actions?showDone=1", "", 200},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
		}
	}
	if it, _ := s.Get(context.Background(), id); it.Status != StatusDismissed {
		t.Fatalf("status %s", it.Status)
	}
}
