package redact_test

import (
	"strings"
	"testing"

	"github.com/agentstack/agentstack/redact"
)

func TestSecrets(t *testing.T) {
	mask := redact.Secrets([]string{"hunter2-long-secret", "hunter2-long", "short", "  "})
	for _, tc := range []struct{ in, want string }{
		{"password hunter2-long-secret here", "password [redacted] here"},
		{"prefix hunter2-long only", "prefix [redacted] only"},
		{"a short value stays", "a short value stays"},
		{"Authorization: Bearer abcdefghijklmnop123", "Authorization: Bearer [redacted]"},
		{"key sk-abcdefghijklmnopqrst end", "key [redacted] end"},
		{"token ghp_abcdefghijklmnopqrstuvwx1234", "token [redacted]"},
		{"aws AKIAABCDEFGHIJKLMNOP.", "aws [redacted]."},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- after", "[redacted] after"},
		{"nothing secret", "nothing secret"},
	} {
		if got := mask(tc.in); got != tc.want {
			t.Errorf("mask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := mask(strings.Repeat("x", 10)); got != strings.Repeat("x", 10) {
		t.Errorf("plain text changed: %q", got)
	}
}
