package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestCallCustomAndWaitIdle(t *testing.T) {
	b := startBridge(t, Options{Servers: []ServerConfig{testServerConfig(t, "srv", nil)}, CustomMethods: []string{"test/ping", "test/absent"}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	raw, err := b.CallCustom(ctx, "srv", "test/ping")
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Pong string }
	if json.Unmarshal(raw, &got); got.Pong != "pong" {
		t.Fatalf("test/ping answered %s", raw)
	}
	if _, err := b.CallCustom(ctx, "srv", "test/absent"); !errors.Is(err, ErrMethodNotFound) {
		t.Fatalf("a method the server lacks: %v", err)
	}

	// WaitIdle returns at once with no call in flight, waits while one is,
	// and returns when it ends.
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	hang := findTool(t, b.Tools(), "mcp__srv__hang")
	callCtx, stopCall := context.WithCancel(ctx)
	callDone := make(chan struct{})
	go func() { hang.Call(callCtx, nil); close(callDone) }()
	idle := make(chan error, 1)
	waitBusy := time.Now().Add(hangGuard)
	for {
		b.mu.Lock()
		n := b.active
		b.mu.Unlock()
		if n == 1 || time.Now().After(waitBusy) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	go func() { idle <- b.WaitIdle(ctx) }()
	select {
	case err := <-idle:
		t.Fatalf("WaitIdle returned during a call: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	stopCall()
	<-callDone
	if err := <-idle; err != nil {
		t.Fatalf("WaitIdle after the call: %v", err)
	}
}
