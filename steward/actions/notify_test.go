package actions

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/agentstack/agentstack/steward/push"
)

func subscribe(t *testing.T, ps *push.Service, url string) {
	key, _ := ecdh.P256().GenerateKey(rand.Reader)
	auth := make([]byte, 16)
	rand.Read(auth)
	if err := ps.Subscribe(push.Subscription{Endpoint: url, Keys: push.Keys{
		P256dh: base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}}); err != nil {
		t.Fatal(err)
	}
}

// TestNotifyNewThroughRealPush sends through the real Web Push service: an
// all-failed send leaves the item eligible, a 410 subscription is pruned
// without failing the delivery to the other device, and an item is
// announced once.
func TestNotifyNewThroughRealPush(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	var hits, goneHits atomic.Int32
	endpoint := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			goneHits.Add(1)
			w.WriteHeader(http.StatusGone)
			return
		}
		hits.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	defer endpoint.Close()
	ps, err := push.Open(push.Options{Home: t.TempDir(), HTTPClient: endpoint.Client()})
	if err != nil {
		t.Fatal(err)
	}
	// No subscription: dispatched (nothing to retry).
	id, _, _ := s.Upsert(ctx, testMailItem(1, c.t), false)
	if n, err := s.NotifyNew(ctx, ps); err != nil || n != 1 {
		t.Fatalf("no subscriptions: %d %v", n, err)
	}
	subscribe(t, ps, endpoint.URL+"/phone")
	subscribe(t, ps, endpoint.URL+"/gone")
	if n, _ := s.NotifyNew(ctx, ps); n != 0 || hits.Load() != 0 {
		t.Fatalf("item %d announced twice", id)
	}
	s.Upsert(ctx, testMailItem(2, c.t), false)
	if n, _ := s.NotifyNew(ctx, ps); n != 0 || hits.Load() != 1 || goneHits.Load() != 1 {
		t.Fatalf("all failed: sent %d, hits %d/%d", n, hits.Load(), goneHits.Load())
	}
	if len(ps.Subscriptions()) != 1 {
		t.Fatalf("the 410 subscription was not pruned: %+v", ps.Subscriptions())
	}
	status.Store(http.StatusCreated)
	if n, _ := s.NotifyNew(ctx, ps); n != 1 || hits.Load() != 2 {
		t.Fatalf("retry: sent %d, hits %d", n, hits.Load())
	}
	if un, _ := s.Unnotified(ctx, 10); len(un) != 0 {
		t.Fatalf("still unnotified: %+v", un)
	}
}
