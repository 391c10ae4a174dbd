// Package push is Steward's Web Push: VAPID keys generated on first use and
// kept in STEWARD_HOME/vapid.json, browser subscriptions in
// STEWARD_HOME/push-subscriptions.json, RFC 8291 (aes128gcm) encrypted sends
// with a per-send report, pruning of expired endpoints (404/410), and the
// /push/* routes the host mounts behind its token.
package push

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	webpush "github.com/SherClockHolmes/webpush-go"
)

// Limits.
const (
	// MaxBodyChars caps a notification's body, in characters.
	MaxBodyChars = 240
	// MaxTitleChars caps a notification's title.
	MaxTitleChars = 80
	// RecordSize is the aes128gcm record size: small enough for every push
	// service (some reject 4 KiB records) and large enough for our payload.
	RecordSize = 2048
	// MaxSubscriptions bounds push-subscriptions.json.
	MaxSubscriptions = 64
	// DefaultTTL is how long a push service keeps an undelivered message.
	DefaultTTL = 12 * time.Hour

	vapidFile         = "vapid.json"
	subscriptionsFile = "push-subscriptions.json"
	sendTimeout       = 15 * time.Second
)

// Options configures a Service.
type Options struct {
	// Home is STEWARD_HOME.
	Home string
	// Contact is STEWARD_PUSH_CONTACT (mailto: or https: URI) sent in the
	// VAPID claims; default mailto:steward@localhost.
	Contact string
	// HTTPClient sends to push services; default a client with a 15 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// RetryDelays override the resend delays of SendRetry (tests).
	RetryDelays []time.Duration
}

// Subscription is a browser PushSubscription as the web app posts it.
type Subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     Keys   `json:"keys"`
	// Label is an optional human hint (the device), shown in settings.
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
}

// Keys are the subscription's base64url p256dh public key and auth secret.
type Keys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// Notification is what a push shows; Body is capped at MaxBodyChars.
type Notification struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	// Tag collapses notifications about the same thing (e.g. watch/event ids).
	Tag string `json:"tag,omitempty"`
	// URL opens when the notification is clicked, e.g. /?chat=chat_…
	URL    string `json:"url,omitempty"`
	ChatID string `json:"chatId,omitempty"`
	// Data carries extra identifiers (watchId, eventId, approvalId).
	Data map[string]string `json:"data,omitempty"`
}

// Report is the outcome of one send, per subscription.
type Report struct {
	Attempted int      `json:"attempted"`
	Delivered int      `json:"delivered"`
	Failed    int      `json:"failed"`
	Pruned    int      `json:"pruned"`
	Errors    []string `json:"errors,omitempty"`
}

// Complete reports whether a notification counts as delivered: no endpoint
// is registered, or at least one accepted it.
func (r Report) Complete() bool { return r.Attempted == 0 || r.Delivered > 0 }

type vapidKeys struct {
	PublicKey  string    `json:"publicKey"`
	PrivateKey string    `json:"privateKey"`
	Created    time.Time `json:"created"`
}

// Service holds the keys and subscriptions and sends notifications.
type Service struct {
	opts Options
	log  *slog.Logger
	keys vapidKeys

	mu     sync.Mutex
	subs   []Subscription
	last   Report    // the latest Send's report, for the System page
	lastAt time.Time // zero until a Send in this process
	lang   string    // notification language; "" is the default

	retryDelays []time.Duration
}

// LastReport returns the latest delivery report of this process and when it
// was made; ok is false before the first send.
func (s *Service) LastReport() (at time.Time, rep Report, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAt, s.last, !s.lastAt.IsZero()
}

// Open loads (generating on first use) the VAPID keys and the subscriptions.
// A damaged vapid.json is an error, never silently replaced: the browsers'
// subscriptions are bound to that key.
func Open(opts Options) (*Service, error) {
	if opts.Home == "" {
		return nil, errors.New("push: STEWARD_HOME is required")
	}
	if opts.Contact == "" {
		opts.Contact = "mailto:steward@localhost"
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: sendTimeout}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Service{opts: opts, log: opts.Logger, retryDelays: opts.RetryDelays}
	if s.retryDelays == nil {
		s.retryDelays = retryDelays
	}
	if err := s.loadLanguage(); err != nil {
		return nil, err
	}
	if err := s.loadKeys(); err != nil {
		return nil, err
	}
	if err := s.loadSubs(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Service) loadKeys() error {
	path := filepath.Join(s.opts.Home, vapidFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		priv, pub, err := webpush.GenerateVAPIDKeys()
		if err != nil {
			return fmt.Errorf("generate VAPID keys: %w", err)
		}
		s.keys = vapidKeys{PublicKey: pub, PrivateKey: priv, Created: s.opts.Now().UTC()}
		data, _ := json.MarshalIndent(s.keys, "", "  ")
		return writeFileAtomic(path, data)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s.keys); err != nil {
		return fmt.Errorf("%s is damaged (%v); move it away to generate new keys — every device must then subscribe again", path, err)
	}
	if _, err := decodePublicKey(s.keys.PublicKey); err != nil || s.keys.PrivateKey == "" {
		return fmt.Errorf("%s does not hold a valid P-256 key pair; move it away to generate new keys", path)
	}
	os.Chmod(path, 0o600)
	return nil
}

func (s *Service) loadSubs() error {
	path := filepath.Join(s.opts.Home, subscriptionsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var subs []Subscription
	if err := json.Unmarshal(b, &subs); err != nil {
		return fmt.Errorf("%s is damaged (%v); fix or remove it (devices then subscribe again)", path, err)
	}
	for _, sub := range subs {
		if validate(sub) == nil {
			s.subs = append(s.subs, sub)
		}
	}
	return nil
}

// saveLocked writes the subscriptions; s.mu is held.
func (s *Service) saveLocked() error {
	data, _ := json.MarshalIndent(s.subs, "", "  ")
	if s.subs == nil {
		data = []byte("[]")
	}
	return writeFileAtomic(filepath.Join(s.opts.Home, subscriptionsFile), data)
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// PublicKey is the VAPID application server key the browser subscribes with.
func (s *Service) PublicKey() string { return s.keys.PublicKey }

// Subscriptions returns the registered subscriptions.
func (s *Service) Subscriptions() []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Subscription(nil), s.subs...)
}

func decodeKey(v string) ([]byte, error) {
	v = strings.TrimRight(strings.TrimSpace(v), "=")
	if b, err := base64.RawURLEncoding.DecodeString(v); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(v)
}

func decodePublicKey(v string) (*ecdh.PublicKey, error) {
	b, err := decodeKey(v)
	if err != nil {
		return nil, err
	}
	return ecdh.P256().NewPublicKey(b)
}

// validate refuses subscriptions that could never be sent to or that point
// somewhere other than a push service over HTTPS.
func validate(sub Subscription) error {
	u, err := url.Parse(sub.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || len(sub.Endpoint) > 2048 {
		return errors.New("endpoint must be an https:// push service URL")
	}
	if _, err := decodePublicKey(sub.Keys.P256dh); err != nil {
		return errors.New("keys.p256dh must be the subscription's base64url P-256 public key")
	}
	if a, err := decodeKey(sub.Keys.Auth); err != nil || len(a) != 16 {
		return errors.New("keys.auth must be the subscription's 16-byte base64url auth secret")
	}
	return nil
}

// Subscribe adds or replaces (by endpoint) a subscription.
func (s *Service) Subscribe(sub Subscription) error {
	sub.Endpoint = strings.TrimSpace(sub.Endpoint)
	if err := validate(sub); err != nil {
		return err
	}
	if utf8.RuneCountInString(sub.Label) > 80 {
		sub.Label = string([]rune(sub.Label)[:80])
	}
	sub.Created = s.opts.Now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.subs[:0:0]
	for _, old := range s.subs {
		if old.Endpoint != sub.Endpoint {
			out = append(out, old)
		}
	}
	if len(out) >= MaxSubscriptions {
		return fmt.Errorf("there are already %d push subscriptions; unsubscribe an old device first", MaxSubscriptions)
	}
	s.subs = append(out, sub)
	return s.saveLocked()
}

// Unsubscribe removes a subscription; it reports whether one was removed.
func (s *Service) Unsubscribe(endpoint string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(map[string]bool{strings.TrimSpace(endpoint): true})
}

func (s *Service) removeLocked(endpoints map[string]bool) (bool, error) {
	out := s.subs[:0:0]
	for _, sub := range s.subs {
		if !endpoints[sub.Endpoint] {
			out = append(out, sub)
		}
	}
	if len(out) == len(s.subs) {
		return false, nil
	}
	s.subs = out
	return true, s.saveLocked()
}

// Cap shortens text to n characters, ending with an ellipsis when cut.
func Cap(text string, n int) string {
	text = strings.TrimSpace(text)
	r := []rune(text)
	if len(r) <= n {
		return text
	}
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// Send encrypts n for every subscription and posts it. 404 and 410 answers
// prune the subscription. The report counts every endpoint; it never fails
// as a whole.
func (s *Service) Send(ctx context.Context, n Notification) Report {
	n.Title = Cap(n.Title, MaxTitleChars)
	n.Body = Cap(n.Body, MaxBodyChars)
	payload, _ := json.Marshal(n)
	subs := s.Subscriptions()
	rep := Report{Attempted: len(subs)}
	type outcome struct {
		ok, gone bool
		err      string
	}
	results := make([]outcome, len(subs))
	var wg sync.WaitGroup
	for i, sub := range subs {
		wg.Go(func() { results[i].ok, results[i].gone, results[i].err = s.sendOne(ctx, sub, payload) })
	}
	wg.Wait()
	gone := map[string]bool{}
	for i, r := range results {
		switch {
		case r.ok:
			rep.Delivered++
		default:
			rep.Failed++
			rep.Errors = append(rep.Errors, r.err)
			if r.gone {
				gone[subs[i].Endpoint] = true
			}
		}
	}
	if len(gone) > 0 {
		s.mu.Lock()
		if _, err := s.removeLocked(gone); err != nil {
			s.log.Error("could not save pruned push subscriptions", "err", err)
		}
		s.mu.Unlock()
		rep.Pruned = len(gone)
	}
	s.log.Info("push sent", "attempted", rep.Attempted, "delivered", rep.Delivered, "failed", rep.Failed, "pruned", rep.Pruned)
	s.mu.Lock()
	s.last, s.lastAt = rep, s.opts.Now()
	s.mu.Unlock()
	return rep
}

// sendOne posts to one endpoint; errors name the push service's host only,
// never the endpoint's secret path.
func (s *Service) sendOne(ctx context.Context, sub Subscription, payload []byte) (ok, gone bool, errMsg string) {
	host := sub.Endpoint
	if u, err := url.Parse(sub.Endpoint); err == nil {
		host = u.Host
	}
	// The library pads the message in place (bytes.NewBuffer(message)), so
	// each concurrent send needs its own copy of the payload.
	resp, err := webpush.SendNotificationWithContext(ctx, bytes.Clone(payload), &webpush.Subscription{
		Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.Keys.P256dh, Auth: sub.Keys.Auth},
	}, &webpush.Options{
		HTTPClient: s.opts.HTTPClient, RecordSize: RecordSize,
		// The library prefixes "mailto:" to anything not https:, so a
		// configured mailto: URI would be sent as mailto:mailto:…, which
		// Apple's push service rejects.
		Subscriber: strings.TrimPrefix(s.opts.Contact, "mailto:"),
		TTL:        int(DefaultTTL.Seconds()), Urgency: webpush.UrgencyHigh,
		VAPIDPublicKey: s.keys.PublicKey, VAPIDPrivateKey: s.keys.PrivateKey,
	})
	if err != nil {
		return false, false, fmt.Sprintf("%s: %v", host, redactURL(err.Error(), sub.Endpoint, host))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return true, false, ""
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, true, fmt.Sprintf("%s: subscription expired (%d), removed", host, resp.StatusCode)
	default:
		return false, false, fmt.Sprintf("%s: push service answered %d", host, resp.StatusCode)
	}
}

// redactURL keeps an endpoint's path (its capability token) out of errors.
func redactURL(msg, endpoint, host string) string {
	return strings.ReplaceAll(msg, endpoint, "https://"+host+"/…")
}
