// Package ekbridge is the client side of the EventKit bridge: the private,
// file-based IPC through which the calendar connector asks the macOS
// launcher (CalendarEventKitBridge, Swift) to perform a calendar write with
// EventKit (spec: "Calendar Write Transport And Identity").
//
// The bridge root (STEWARD_CALENDAR_BRIDGE_DIR, by default
// ~/Library/Application Support/Steward/calendar-bridge) holds requests/,
// processing/ and responses/, each created with mode 0700. A request is a
// JSON file named by a random UUID, written with mode 0600 through a
// temporary file and a rename, so the launcher never reads half of one. The
// launcher moves a request into processing/ before executing it, checks its
// expiresAtMs, and publishes the response into responses/ the same way.
// The client checks every 50 ms and consumes the response.
//
// When the wait ends without a response, the client withdraws the request
// if it is still in requests/: then it certainly did not run. If the
// launcher already claimed it the outcome is uncertain, and stays so: the
// mutation may finish after the caller stopped waiting. Requests the
// launcher finds in processing/ after a restart are answered with
// outcomeUnknown, never replayed. This is local per-user IPC, not an
// authenticated API.
package ekbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// Protocol constants.
const (
	// Version is the request format version.
	Version = 1
	// DefaultTimeout is how long a client waits for a response.
	DefaultTimeout = 30 * time.Second
	// PollInterval is how often the client looks for the response.
	PollInterval = 50 * time.Millisecond
	// EnvDir names the environment variable the launcher sets for its
	// children.
	EnvDir = "STEWARD_CALENDAR_BRIDGE_DIR"
)

// The bridge's folders.
const (
	Requests   = "requests"
	Processing = "processing"
	Responses  = "responses"
)

// DefaultDir is the bridge root under home on macOS.
func DefaultDir(home string) string {
	return filepath.Join(home, "Library", "Application Support", "Steward", "calendar-bridge")
}

// Request is one write for the launcher to perform.
type Request struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	// Operation is create, update or delete.
	Operation string `json:"operation"`
	// ExpiresAtMs is the Unix time in milliseconds after which the launcher
	// must not start executing the request.
	ExpiresAtMs int64 `json:"expiresAtMs"`
	// Payload is the operation's arguments (calendar id, event identity,
	// occurrence, scope, fields).
	Payload json.RawMessage `json:"payload"`
}

// Response is the launcher's answer.
type Response struct {
	ID string `json:"id"`
	OK bool   `json:"ok"`
	// Result is the operation's result (the event's identifiers).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is set when OK is false.
	Error *ResponseError `json:"error,omitempty"`
	// OutcomeUnknown: the launcher restarted while the request was being
	// processed; whether it took effect is not known.
	OutcomeUnknown bool `json:"outcomeUnknown,omitempty"`
}

// ResponseError is a refusal or failure reported by the launcher. When
// NotExecuted is true the launcher guarantees nothing was changed (a
// validation failure, CALENDAR_FULL_ACCESS_REQUIRED, an expired request).
type ResponseError struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	NotExecuted bool   `json:"notExecuted,omitempty"`
}

func (e *ResponseError) Error() string {
	if e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return e.Message
}

// Outcome errors.
var (
	// ErrNotExecuted wraps failures that prove the request did not run: it
	// could not be submitted, or it was withdrawn unclaimed after the wait.
	ErrNotExecuted = errors.New("the EventKit bridge did not execute the request")
	// ErrUncertain wraps failures after the launcher claimed the request:
	// the write may or may not have happened.
	ErrUncertain = errors.New("the EventKit bridge's outcome is unknown")
)

// Client submits requests to a bridge root.
type Client struct {
	// Dir is the bridge root.
	Dir string
	// Timeout is the wait for a response (DefaultTimeout).
	Timeout time.Duration
	// Now replaces time.Now.
	Now func() time.Time
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Prepare creates the bridge folders (mode 0700) and tightens existing ones.
func Prepare(dir string) error {
	for _, sub := range []string{"", Requests, Processing, Responses} {
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("prepare calendar bridge %s: %w", p, err)
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("prepare calendar bridge %s: %w", p, err)
		}
	}
	return nil
}

// Do submits one request and waits for its response. It returns the
// response when the launcher answered (which may carry an error), or an
// error wrapping ErrNotExecuted or ErrUncertain.
func (c *Client) Do(ctx context.Context, operation string, payload any) (*Response, error) {
	if err := Prepare(c.Dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotExecuted, err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: encode payload: %v", ErrNotExecuted, err)
	}
	req := Request{ID: localsource.NewUUID(), Version: Version, Operation: operation, ExpiresAtMs: c.now().Add(timeout).UnixMilli(), Payload: raw}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: encode request: %v", ErrNotExecuted, err)
	}
	reqPath := filepath.Join(c.Dir, Requests, req.ID+".json")
	if err := localsource.WriteFileAtomic(reqPath, data, localsource.WriteOptions{Perm: 0o600, NoClobber: true}); err != nil {
		var pub *localsource.PublishedError
		if !errors.As(err, &pub) {
			return nil, fmt.Errorf("%w: submit: %v", ErrNotExecuted, err)
		}
	}
	respPath := filepath.Join(c.Dir, Responses, req.ID+".json")
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		if resp, err := consume(respPath, req.ID); resp != nil || err != nil {
			return resp, err
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		// One last look, then withdraw if still unclaimed.
		if resp, err := consume(respPath, req.ID); resp != nil || err != nil {
			return resp, err
		}
		why := "no response within " + timeout.String()
		if ctx.Err() != nil {
			why = "the caller stopped waiting (" + ctx.Err().Error() + ")"
		}
		if err := os.Remove(reqPath); err == nil {
			return nil, fmt.Errorf("%w: %s; the request was withdrawn before the launcher claimed it (is the Steward launcher running?)", ErrNotExecuted, why)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s, and the request could not be withdrawn: %v", ErrUncertain, why, err)
		}
		return nil, fmt.Errorf("%w: %s after the launcher claimed the request; the change may still be made", ErrUncertain, why)
	}
}

// consume reads and removes a response if it is there.
func consume(path, id string) (*Response, error) {
	data, err := localsource.ReadBounded(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read response: %v", ErrUncertain, err)
	}
	os.Remove(path)
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("%w: malformed response: %v", ErrUncertain, err)
	}
	if resp.ID != id {
		return nil, fmt.Errorf("%w: response for %q in the file of %q", ErrUncertain, resp.ID, id)
	}
	return &resp, nil
}
