package llm

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// FailedRequest is one failed provider request as a ProviderTransport saw
// it: what was sent (Body, the serialized upstream request) and how it
// failed.
type FailedRequest struct {
	Time     time.Time
	Provider string
	Model    string
	Protocol Protocol
	Endpoint string // the path, never the URL
	// Status is the HTTP status; 0 for a network failure or a failure
	// reported inside a stream.
	Status int
	// Cause is FailureCause's class, or "network", "auth_refresh" or
	// "protocol".
	Cause string
	Code  string // the provider's structured error code
	Body  []byte
}

// FailureRecorder receives failed provider requests.
type FailureRecorder interface {
	RecordFailure(FailedRequest)
}

// Limits of failed-request diagnostics.
const (
	DiagnosticSlots       = 16
	DiagnosticWindow      = time.Hour
	DiagnosticMaxDocument = 8 << 20
	DiagnosticMaxMetadata = 16 << 10
)

// Document versions of failed-request diagnostics.
const (
	DiagnosticFormat  = 3
	DiagnosticPrivacy = 2
)

// FailedRequestDiagnostics is the opt-in store of failed provider requests:
// one activation directory, created exclusively, holding at most
// DiagnosticSlots documents written within DiagnosticWindow of activation.
// Documents are private files (0600) for the operator's own diagnosis: the
// request is projected without images, credentials or known secrets, and
// nothing reads them back, lists them or exports them.
type FailedRequestDiagnostics struct {
	dir        string
	activation string
	began      time.Time
	secrets    []string
	now        func() time.Time

	mu      sync.Mutex
	used    int
	stopped bool
}

// DiagnosticsOptions configures OpenFailedRequestDiagnostics.
type DiagnosticsOptions struct {
	// Dir holds one subdirectory per activation.
	Dir string
	// Secrets are redacted wherever they occur in a request.
	Secrets []string
	Now     func() time.Time
}

// OpenFailedRequestDiagnostics activates diagnostics under a fresh
// activation directory Dir/<UUID>.
func OpenFailedRequestDiagnostics(opts DiagnosticsOptions) (*FailedRequestDiagnostics, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create diagnostics directory: %w", err)
	}
	id := newUUID()
	// Mkdir (not MkdirAll) fails on an existing directory: an activation
	// never reuses another's slots.
	if err := os.Mkdir(filepath.Join(opts.Dir, id), 0o700); err != nil {
		return nil, fmt.Errorf("create diagnostics activation: %w", err)
	}
	var secrets []string
	for _, s := range opts.Secrets {
		if len(s) >= 8 {
			secrets = append(secrets, s)
		}
	}
	return &FailedRequestDiagnostics{dir: filepath.Join(opts.Dir, id), activation: id, began: opts.Now(), secrets: secrets, now: opts.Now}, nil
}

// Activation returns the activation UUID (the directory name).
func (d *FailedRequestDiagnostics) Activation() string { return d.activation }

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// diagnosticDocument is one stored failure.
type diagnosticDocument struct {
	Format     int       `json:"format"`
	Privacy    int       `json:"privacy"`
	Activation string    `json:"activation"`
	Slot       int       `json:"slot"`
	RecordedAt time.Time `json:"recorded_at"`
	Provider   string    `json:"provider"`
	Model      string    `json:"model,omitempty"`
	Protocol   Protocol  `json:"protocol,omitempty"`
	Endpoint   string    `json:"endpoint"`
	Status     int       `json:"status"`
	Cause      string    `json:"cause"`
	Code       string    `json:"code,omitempty"`
	// Fidelity says how Request relates to the bytes sent: exact,
	// reencoded (same JSON values, images or secrets replaced), or
	// omitted (not kept, too large or not JSON).
	Fidelity      string          `json:"fidelity"`
	RequestSHA256 string          `json:"request_sha256"`
	RequestBytes  int             `json:"request_bytes"`
	Redactions    int             `json:"redactions"`
	ImagesOmitted int             `json:"images_omitted"`
	Request       json.RawMessage `json:"request,omitempty"`
}

// RecordFailure stores f if a slot is free and the window is open; once
// either runs out the store stops for good. A write failure also stops it,
// so a broken directory costs one attempt, not one per request.
func (d *FailedRequestDiagnostics) RecordFailure(f FailedRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || d.used >= DiagnosticSlots || d.now().Sub(d.began) > DiagnosticWindow {
		d.stopped = true
		return
	}
	d.used++
	sum := sha256.Sum256(f.Body)
	doc := diagnosticDocument{Format: DiagnosticFormat, Privacy: DiagnosticPrivacy, Activation: d.activation, Slot: d.used,
		RecordedAt: f.Time.UTC(), Provider: f.Provider, Model: f.Model, Protocol: f.Protocol, Endpoint: f.Endpoint,
		Status: f.Status, Cause: f.Cause, Code: f.Code, RequestSHA256: hex.EncodeToString(sum[:]), RequestBytes: len(f.Body)}
	doc.Fidelity = "omitted"
	if p, ok := d.project(f.Body, &doc); ok {
		doc.Request = p
		doc.Fidelity = "exact"
		if doc.Redactions > 0 || doc.ImagesOmitted > 0 {
			doc.Fidelity = "reencoded"
		}
	}
	b, err := json.Marshal(doc)
	if err == nil && len(b) > DiagnosticMaxDocument {
		doc.Request, doc.Fidelity = nil, "omitted"
		b, err = json.Marshal(doc)
	}
	if err == nil && len(b) > DiagnosticMaxMetadata && doc.Request == nil {
		err = errors.New("metadata too large")
	}
	if err == nil {
		err = writePrivateFile(filepath.Join(d.dir, fmt.Sprintf("%02d.json", d.used)), json.RawMessage(b))
	}
	if err != nil {
		d.stopped = true
	}
}

// project returns the request with image data and secrets replaced, and
// whether the body was a JSON object at all.
func (d *FailedRequestDiagnostics) project(body []byte, doc *diagnosticDocument) (json.RawMessage, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, false
	}
	if d.walk(&v, doc) == 0 {
		return json.RawMessage(body), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return b, true
}

// walk replaces image data URLs and secrets in place and counts changes.
func (d *FailedRequestDiagnostics) walk(v *any, doc *diagnosticDocument) int {
	n := 0
	switch x := (*v).(type) {
	case map[string]any:
		for k, e := range x {
			n += d.walk(&e, doc)
			x[k] = e
		}
	case []any:
		for i := range x {
			n += d.walk(&x[i], doc)
		}
	case string:
		if strings.HasPrefix(x, "data:image/") {
			sum := sha256.Sum256([]byte(x))
			*v = map[string]any{"omitted": "image", "sha256": hex.EncodeToString(sum[:]), "bytes": len(x)}
			doc.ImagesOmitted++
			return 1
		}
		for _, s := range d.secrets {
			if c := strings.Count(x, s); c > 0 {
				x = strings.ReplaceAll(x, s, "[REDACTED]")
				doc.Redactions += c
				n += c
			}
		}
		*v = x
	}
	return n
}
