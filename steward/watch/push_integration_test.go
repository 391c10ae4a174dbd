package watch_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/watch"
	"github.com/agentstack/agentstack/steward/watch/timewatch"
)

type textDeliverer struct{ turns atomic.Int32 }

func (d *textDeliverer) DeliverWatchTurn(_ context.Context, t watch.Turn) (watch.Delivered, error) {
	d.turns.Add(1)
	return watch.Delivered{ChatID: t.ChatID, MessageID: "asst_1", Text: "È ora di uscire."}, nil
}

// TestAllFailedPushIsRetried wires the engine to the real push service: a
// push service that fails keeps the event pending with its composed text;
// the retry sends again without a new agent turn and completes.
func TestAllFailedPushIsRetried(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	var hits atomic.Int32
	endpoint := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	defer endpoint.Close()
	home := t.TempDir()
	ps, err := push.Open(push.Options{Home: home, HTTPClient: endpoint.Client()})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdh.P256().GenerateKey(rand.Reader)
	auth := make([]byte, 16)
	rand.Read(auth)
	if err := ps.Subscribe(push.Subscription{Endpoint: endpoint.URL + "/sub", Keys: push.Keys{
		P256dh: base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}}); err != nil {
		t.Fatal(err)
	}
	clock := &settableClock{now: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	d := &textDeliverer{}
	e, err := watch.Open(context.Background(), watch.Options{Path: filepath.Join(home, "watches.db"), Deliverer: d, Notifier: ps, Clock: clock,
		Adapters: []watch.Adapter{timewatch.New(timewatch.Options{Now: clock.Now})}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Create(context.Background(), watch.CreateRequest{Source: "time", ResourceRef: "afterMinutes=1", ChatID: "chat_1",
		Instruction: "avvisami tra un minuto", Rules: []watch.Rule{{ID: "at", Event: timewatch.EventReached}}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	c, _ := e.RunOnce(context.Background())
	if c.Queued != 1 || c.Delivered != 0 || hits.Load() != 1 {
		t.Fatalf("first pass %+v, %d push requests", c, hits.Load())
	}
	if s := e.Status(context.Background()); s.Pending != 1 {
		t.Fatalf("status %+v", s)
	}
	status.Store(http.StatusCreated)
	clock.Advance(time.Minute)
	if c, _ = e.RunOnce(context.Background()); c.Delivered != 1 || hits.Load() != 2 || d.turns.Load() != 1 {
		t.Fatalf("retry %+v, %d pushes, %d turns", c, hits.Load(), d.turns.Load())
	}
}
