package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

// store stands in for an index: it exists only once built.
type store struct {
	built  bool
	opens  int
	closed []int
}

type service struct {
	store *store
	n     int // which open made it
}

type greetIn struct {
	Name string `json:"name"`
}

type greetOut struct {
	Text string `json:"text"`
}

func (s *service) Greet(ctx context.Context, in greetIn) (*greetOut, error) {
	if in.Name == "" {
		return nil, errors.New("name is required")
	}
	return &greetOut{Text: fmt.Sprintf("hello %s from open %d", in.Name, s.n)}, nil
}

func (st *store) lazy() *mcptool.Lazy[*service] {
	return mcptool.NewLazy(func(context.Context) (*service, error) {
		if !st.built {
			return nil, errors.New("index not built yet: run `notes build`")
		}
		st.opens++
		return &service{store: st, n: st.opens}, nil
	}, func(s *service) error {
		st.closed = append(st.closed, s.n)
		return nil
	})
}

func TestLazy(t *testing.T) {
	ctx := context.Background()
	st := &store{}
	l := st.lazy()
	if err := l.Close(); err != nil || len(st.closed) != 0 {
		t.Errorf("close before any open: %v, closed %v", err, st.closed)
	}
	steps := []struct {
		build   bool
		close   bool
		wantN   int // 0: want an error
		wantErr string
	}{
		{wantErr: "not built yet"},
		{wantErr: "not built yet"}, // retried, still failing
		{build: true, wantN: 1},    // opens once built
		{wantN: 1},                 // and keeps it
		{close: true, wantN: 2},    // reopens after Close
	}
	for i, s := range steps {
		if s.build {
			st.built = true
		}
		if s.close {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		svc, err := l.Get(ctx)
		switch {
		case s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr) || svc != nil):
			t.Errorf("step %d: %v, %v; want an error mentioning %q", i, svc, err, s.wantErr)
		case s.wantErr == "" && (err != nil || svc.n != s.wantN):
			t.Errorf("step %d: %+v, %v; want open %d", i, svc, err, s.wantN)
		}
	}
	if fmt.Sprint(st.closed) != "[1]" || st.opens != 2 {
		t.Errorf("closed %v after %d opens, want [1] after 2", st.closed, st.opens)
	}
}

// OnIndex opens the index on first use, reports "not built" until it
// exists, builds the service on it once and releases it on close.
func TestOnIndex(t *testing.T) {
	ctx := context.Background()
	st := &store{}
	served := 0
	open, closeFn := mcptool.OnIndex(func(context.Context) (*store, error) {
		if !st.built {
			return nil, errors.New("index not built yet: run `notes build`")
		}
		st.opens++
		return st, nil
	}, func(_ context.Context, s *store) *service {
		served++
		return &service{store: s, n: s.opens}
	}, func(s *service) error {
		st.closed = append(st.closed, s.n)
		return nil
	})
	if svc, err := open(ctx); err == nil || !strings.Contains(err.Error(), "not built yet") || svc != nil {
		t.Fatalf("before the build: %v, %v", svc, err)
	}
	st.built = true
	a, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := open(ctx)
	if a != b || a.n != 1 || served != 1 {
		t.Errorf("services %p %p (open %d), built %d times; want one, built once", a, b, a.n, served)
	}
	if err := closeFn(); err != nil || fmt.Sprint(st.closed) != "[1]" {
		t.Errorf("close: %v, closed %v", err, st.closed)
	}
}

func TestHandlerOverMCP(t *testing.T) {
	st := &store{}
	l := st.lazy()
	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "test"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Greets."}, mcptool.Handler(l.Get, (*service).Greet))
	cs := mcptooltest.Connect(t, server)
	for _, tc := range []struct {
		name    string
		build   bool
		args    map[string]any
		want    string
		wantErr string
	}{
		{name: "before the index exists", args: map[string]any{"name": "Anna"}, wantErr: "run `notes build`"},
		{name: "once built", build: true, args: map[string]any{"name": "Anna"}, want: "hello Anna from open 1"},
		{name: "service error", args: map[string]any{"name": ""}, wantErr: "name is required"},
		{name: "kept open", args: map[string]any{"name": "Marco"}, want: "hello Marco from open 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.build {
				st.built = true
			}
			res, text := mcptooltest.CallText(t, cs, "greet", tc.args)
			if tc.wantErr != "" {
				if !res.IsError || !strings.Contains(text, tc.wantErr) {
					t.Errorf("result %q (error %t), want a tool error mentioning %q", text, res.IsError, tc.wantErr)
				}
				return
			}
			var out greetOut
			if res.IsError || json.Unmarshal([]byte(text), &out) != nil || out.Text != tc.want {
				t.Errorf("result %q (error %t), want %q", text, res.IsError, tc.want)
			}
		})
	}
}
