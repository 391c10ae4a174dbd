package trains

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is the live ViaggiaTreno REST service.
const DefaultBaseURL = "http://www.viaggiatreno.it/infomobilita/resteasy/viaggiatreno"

// Client limits.
const (
	DefaultTimeout = 10 * time.Second
	maxAttempts    = 2
	maxBodyBytes   = 8 << 20
)

// ErrNoLiveData is ViaggiaTreno's 204: the service has nothing for the
// request (an unknown train today, an empty board).
var ErrNoLiveData = errors.New("ViaggiaTreno has no live data for this request")

// HTTPError is a non-success status from ViaggiaTreno.
type HTTPError struct {
	Status int
	Path   string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("ViaggiaTreno answered %d %s for %s", e.Status, http.StatusText(e.Status), e.Path)
}

// ClientOptions configures a Client.
type ClientOptions struct {
	// BaseURL is VIAGGIATRENO_BASE_URL; default DefaultBaseURL.
	BaseURL string
	// Timeout bounds each attempt; default DefaultTimeout.
	Timeout time.Duration
	// HTTPClient defaults to a plain client (the per-attempt timeout applies).
	HTTPClient *http.Client
	// RetryDelay waits between the two attempts; default 300 ms.
	RetryDelay time.Duration
}

// Client calls ViaggiaTreno's JSON endpoints with a per-attempt timeout and
// at most two attempts. It never scrapes HTML.
type Client struct {
	base  string
	opts  ClientOptions
	httpc *http.Client
}

// NewClient returns a client.
func NewClient(opts ClientOptions) *Client {
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 300 * time.Millisecond
	}
	c := &Client{base: strings.TrimRight(opts.BaseURL, "/"), opts: opts, httpc: opts.HTTPClient}
	if c.httpc == nil {
		c.httpc = &http.Client{}
	}
	return c
}

// get fetches base/path (path segments already escaped). A 204 is
// ErrNoLiveData; 5xx statuses and transport errors are retried once.
func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	var lastErr error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(c.opts.RetryDelay):
			}
		}
		body, retry, err := c.once(ctx, path)
		if err == nil {
			return body, nil
		}
		lastErr = err
		if !retry || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func (c *Client) once(ctx context.Context, path string) (body []byte, retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, false, fmt.Errorf("ViaggiaTreno request %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9")
	resp, err := c.httpc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, true, fmt.Errorf("ViaggiaTreno is unreachable (%s): %w", path, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return nil, false, ErrNoLiveData
	case resp.StatusCode >= 500:
		return nil, true, &HTTPError{Status: resp.StatusCode, Path: path}
	case resp.StatusCode != http.StatusOK:
		return nil, false, &HTTPError{Status: resp.StatusCode, Path: path}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		return nil, true, fmt.Errorf("read ViaggiaTreno response %s: %w", path, err)
	}
	if len(b) > maxBodyBytes {
		return nil, false, fmt.Errorf("ViaggiaTreno response %s is over %d bytes", path, maxBodyBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, false, ErrNoLiveData
	}
	return b, false, nil
}

// Station is a station candidate from autocomplete. ShortName and Label are
// empty when the source only gives the name (the pipe-separated form).
type Station struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	ShortName string `json:"shortName,omitempty"`
	Label     string `json:"label,omitempty"`
}

// SearchStations asks cercaStazione for stations whose name starts with
// prefix, falling back to autocompletaStazione when cercaStazione fails.
// Both the JSON and the pipe-separated NAME|ID forms are accepted. No
// stations is an empty list, not an error.
func (c *Client) SearchStations(ctx context.Context, prefix string) ([]Station, error) {
	prefix = strings.TrimSpace(prefix)
	if prefix == "" {
		return nil, nil
	}
	b, err := c.get(ctx, "/cercaStazione/"+url.PathEscape(prefix))
	var he *HTTPError
	if errors.As(err, &he) {
		b, err = c.get(ctx, "/autocompletaStazione/"+url.PathEscape(prefix))
	}
	if errors.Is(err, ErrNoLiveData) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseStations(b)
}

// parseStations reads cercaStazione JSON or autocompletaStazione text.
func parseStations(b []byte) ([]Station, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var raw []struct {
			ID        string  `json:"id"`
			NomeLungo string  `json:"nomeLungo"`
			NomeBreve *string `json:"nomeBreve"`
			Label     *string `json:"label"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, fmt.Errorf("ViaggiaTreno station list is not valid JSON: %w", err)
		}
		out := make([]Station, 0, len(raw))
		for _, r := range raw {
			if id := strings.TrimSpace(r.ID); id != "" && strings.TrimSpace(r.NomeLungo) != "" {
				out = append(out, Station{ID: id, Name: strings.TrimSpace(r.NomeLungo), ShortName: str(r.NomeBreve), Label: str(r.Label)})
			}
		}
		return out, nil
	}
	var out []Station
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, id, ok := strings.Cut(line, "|")
		if !ok || strings.TrimSpace(id) == "" {
			return nil, fmt.Errorf("ViaggiaTreno station line %q is not NAME|ID", truncate(line, 80))
		}
		out = append(out, Station{ID: strings.TrimSpace(id), Name: strings.TrimSpace(name)})
	}
	return out, sc.Err()
}

// boardTime formats t as partenze expects (JavaScript Date.toString in
// Europe/Rome), e.g. "Sat Jan 03 2026 10:00:00 GMT+0100".
func boardTime(t time.Time) string {
	return t.In(rome).Format("Mon Jan 02 2006 15:04:05 GMT-0700")
}

// departures returns the partenze board of stationID around t.
func (c *Client) departures(ctx context.Context, stationID string, t time.Time) ([]rawRun, error) {
	b, err := c.get(ctx, "/partenze/"+url.PathEscape(stationID)+"/"+url.PathEscape(boardTime(t)))
	if err != nil {
		return nil, err
	}
	var rows []rawRun
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("ViaggiaTreno departure board of %s is not valid JSON: %w", stationID, err)
	}
	return rows, nil
}

// run returns andamentoTreno for the run identified by origin, number and
// service day. When the three-component form has no data (404 or 204) it
// falls back to the current-day two-component form.
func (c *Client) run(ctx context.Context, originID string, number, dayMs int64) (*rawRun, error) {
	path := fmt.Sprintf("/andamentoTreno/%s/%d", url.PathEscape(originID), number)
	b, err := c.get(ctx, path+"/"+strconv.FormatInt(dayMs, 10))
	var he *HTTPError
	if errors.Is(err, ErrNoLiveData) || (errors.As(err, &he) && he.Status == http.StatusNotFound) {
		b, err = c.get(ctx, path)
	}
	if err != nil {
		return nil, err
	}
	var r rawRun
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("ViaggiaTreno status of train %d is not valid JSON: %w", number, err)
	}
	return &r, nil
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
