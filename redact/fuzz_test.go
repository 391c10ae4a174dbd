package redact_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentstack/agentstack/redact"
)

// planted is the secret the fuzz tests hide in their inputs. It uses only
// characters every secret pattern accepts, and is long enough that a kept
// fragment of it would show.
const planted = "PLaNTeDz9Qv7LmK2wR4tY8uB"

// plantings are the ways a secret appears in text, one per masking rule.
var plantings = []string{
	"password=%s",
	"API_KEY: %s",
	`{"token": "%s"}`,
	`{\"client_secret\":\"%s\"}`,
	"Authorization: Bearer %s",
	"sent with bearer %s",
	"Cookie: a=1; sid=%s",
	"sk-%s",
	"https://bob:%s@example.com/x",
	"https://example.com/cb?state=1&access_token=%s&x=2",
	"https://maps.example.com/?key=%s",
	"-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----",
	"-----BEGIN PRIVATE KEY-----\n%s",
}

// FuzzString checks, for any surrounding text, that String and Snippet never
// panic, never keep a planted secret or a fragment of it, stay within their
// bounds, produce valid UTF-8 and are idempotent.
func FuzzString(f *testing.F) {
	f.Fuzz(func(t *testing.T, before, after string) {
		if strings.Contains(before+after, planted[:6]) {
			t.Skip("the surrounding text already holds part of the secret")
		}
		for _, p := range plantings {
			in := before + " " + strings.Replace(p, "%s", planted, 1) + " " + after
			for _, fn := range []struct {
				name  string
				f     func(string) string
				limit int
			}{{"String", redact.String, redact.MaxStringLen}, {"Snippet", redact.Snippet, redact.SnippetLen}} {
				out := fn.f(in)
				if strings.Contains(out, planted[:6]) {
					t.Fatalf("%s kept the secret planted as %q:\n in  %q\n out %q", fn.name, p, in, out)
				}
				if n := utf8.RuneCountInString(out); n > fn.limit {
					t.Fatalf("%s output has %d characters", fn.name, n)
				}
				if !utf8.ValidString(out) {
					t.Fatalf("%s output is not valid UTF-8: %q", fn.name, out)
				}
				if again := fn.f(out); again != out {
					t.Fatalf("%s not idempotent:\n once  %q\n twice %q", fn.name, out, again)
				}
			}
		}
		// The surrounding text alone must be idempotent too.
		if out := redact.String(before); redact.String(out) != out {
			t.Fatalf("String not idempotent on %q: %q → %q", before, out, redact.String(out))
		}
	})
}

// FuzzValue decodes arbitrary JSON, plants secrets beside it and checks that
// Value never panics, always marshals, keeps no planted secret, respects every
// cap and is idempotent.
func FuzzValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return
		}
		if strings.Contains(string(data), planted[:6]) {
			t.Skip("the input already holds part of the secret")
		}
		in := map[string]any{
			"payload":  v,
			"password": planted,
			"notes":    []any{"login with token=" + planted, map[string]any{"body": "Authorization: Bearer " + planted}},
		}
		out := redact.Value(in)
		raw, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("result does not marshal: %v", err)
		}
		if strings.Contains(string(raw), planted[:6]) {
			t.Fatalf("planted secret kept: %s", raw)
		}
		checkCaps(t, out, 1)
		if again := redact.Value(out); !reflect.DeepEqual(again, out) {
			a, _ := json.Marshal(again)
			t.Fatalf("not idempotent:\n once  %s\n twice %s", raw, a)
		}
	})
}

func checkCaps(t *testing.T, v any, depth int) {
	t.Helper()
	switch x := v.(type) {
	case string:
		if n := utf8.RuneCountInString(x); n > redact.MaxStringLen {
			t.Fatalf("string of %d characters", n)
		}
	case []any:
		if depth > redact.MaxDepth || len(x) > redact.MaxItems {
			t.Fatalf("array of %d items at depth %d", len(x), depth)
		}
		for _, e := range x {
			checkCaps(t, e, depth+1)
		}
	case map[string]any:
		if depth > redact.MaxDepth || len(x) > redact.MaxKeys {
			t.Fatalf("object of %d keys at depth %d", len(x), depth)
		}
		for _, e := range x {
			checkCaps(t, e, depth+1)
		}
	}
}
