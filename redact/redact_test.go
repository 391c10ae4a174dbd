package redact_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentstack/agentstack/redact"
)

func TestString(t *testing.T) {
	x := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct{ name, in, want string }{
		{"plain text is kept", "Sent the weekly report to Anna.", "Sent the weekly report to Anna."},
		{"bearer token", "called with Bearer abc.DEF-ghi_123~+/= ok", "called with Bearer [REDACTED] ok"},
		{"bearer any case", "bearer eyABCDEF", "bearer [REDACTED]"},
		{"sk- key", "key sk-proj-abcdefghijklmnop1234 used", "key sk-[REDACTED] used"},
		{"sk_live key", "stripe sk_live_abcdefghijklmnopqrst", "stripe sk_[REDACTED]"},
		{"short sk- is not a key", "sk-learn", "sk-learn"},
		{"url credentials", "clone https://alice:hunter2@git.example.com/r.git", "clone https://[REDACTED]@git.example.com/r.git"},
		{"url token as user", "git+ssh://tok3n@host/x", "git+ssh://[REDACTED]@host/x"},
		{"url without credentials", "see https://example.com/a@b and bob@example.com", "see https://example.com/a@b and bob@example.com"},
		{"query access_token", "https://api.example.com/v1?access_token=abc123&page=2", "https://api.example.com/v1?access_token=[REDACTED]&page=2"},
		{"query key", "https://maps.example.com/?q=rome&key=Zz9-abc", "https://maps.example.com/?q=rome&key=[REDACTED]"},
		{"query signature stops at fragment", "https://s3.example.com/f?X-Amz-Signature=abcd#top", "https://s3.example.com/f?X-Amz-Signature=[REDACTED]#top"},
		{"query code", "/callback?code=xyz789&state=s1", "/callback?code=[REDACTED]&state=s1"},
		{"key= outside a query is kept", "the sort key=name", "the sort key=name"},
		{"inline password", "password=hunter2 next", "password=[REDACTED] next"},
		{"env style", "export API_KEY: abc123", "export API_KEY: [REDACTED]"},
		{"dotted name", "db.password = p@ss;", "db.password = [REDACTED];"},
		{"json text", `{"token": "abc def", "user": "bob"}`, `{"token": "[REDACTED]", "user": "bob"}`},
		{"escaped json text", `{\"password\":\"hunter2\",\"u\":1}`, `{\"password\":\"[REDACTED]\",\"u\":1}`},
		{"single quotes", "DB_PASSWORD = 's3cr3t pass' # prod", "DB_PASSWORD = '[REDACTED]' # prod"},
		{"unclosed quote runs to the end", `secret: "abc def`, `secret: "[REDACTED]`},
		{"go assignment", `token := "abc"`, `token := "[REDACTED]"`},
		{"arrow", `'api_key' => 'abc'`, `'api_key' => '[REDACTED]'`},
		{"authorization header to end of line", "Authorization: Basic dXNlcjpwYXNz\nHost: x", "Authorization: [REDACTED]\nHost: x"},
		{"cookie header", "Cookie: sid=abc; theme=dark", "Cookie: [REDACTED]"},
		{"header inside quotes", "curl -H 'Authorization: Bearer abc' -d x", "curl -H 'Authorization: [REDACTED]' -d x"},
		{"header inside json text", `{"h":"Cookie: a=b; c=d","n":1}`, `{"h":"Cookie: [REDACTED]","n":1}`},
		{"header inside escaped json text", `{\"h\":\"Cookie: a=b\"}`, `{\"h\":\"Cookie: [REDACTED]\"}`},
		{"scheme value", "token: Bearer abc", "token: [REDACTED]"},
		{"not secret names", "max_tokens=1000 author: Jane key: k1", "max_tokens=1000 author: Jane key: k1"},
		{"pem block", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----\ndone", "key:\n[REDACTED:private-key]\ndone"},
		{"pem without end", "x -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt", "x [REDACTED:private-key]"},
		{"pem after a secret name", "private_key: -----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----", "private_key: [REDACTED:private-key]"},
		{"public key is kept", "-----BEGIN PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----"},
		{"github token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"},
		{"jwt", "id eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig-nature_1 end", "id [REDACTED] end"},
		{"aws key id", "AKIAIOSFODNN7EXAMPLE", "[REDACTED]"},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
		{"bounded to 600", x(700), x(599) + "…"},
		{"600 is kept", x(600), x(600)},
		{"runes, not bytes", strings.Repeat("é", 700), strings.Repeat("é", 599) + "…"},
		// A secret straddling the cut is masked before the cut is taken.
		{"secret across the cut", x(590) + " password=hunter2hunter2", x(590) + " password…"},
		{"placeholder never split", x(585) + " password=hunter2hunter2", x(585) + " password=…"},
		{"bearer across the cut", x(590) + " Bearer abcdefghijklmnop", x(590) + " Bearer …"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.String(tc.in)
			if got != tc.want {
				t.Fatalf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if again := redact.String(got); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
		})
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("word ", 100)
	for _, tc := range []struct{ name, in, want string }{
		{"short kept", "hello", "hello"},
		{"cut to 120", long, long[:119] + "…"},
		{"masked before the cut", strings.Repeat("a", 110) + " token=abcdefghijkl", strings.Repeat("a", 110) + " token=…"},
		{"emoji not split", strings.Repeat("😀", 130), strings.Repeat("😀", 119) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.Snippet(tc.in)
			if got != tc.want {
				t.Fatalf("Snippet\n got %q\nwant %q", got, tc.want)
			}
			if n := utf8.RuneCountInString(got); n > redact.SnippetLen {
				t.Errorf("snippet has %d characters", n)
			}
		})
	}
}

func TestIsSecretKey(t *testing.T) {
	for _, k := range []string{"password", "Passwd", "passphrase", "client_secret", "X-Api-Key", "apiKey", "aws_access_key_id",
		"Authorization", "Proxy-Authorization", "auth", "basicAuth", "oauth", "Cookie", "set-cookie", "session", "sessionId",
		"private_key", "privKey", "credentials", "accessToken", "refresh_token", "csrf-token", "token", "pin", "OTP", "db.pwd",
		"connection_string", "SIGNING_KEY"} {
		if !redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false", k)
		}
	}
	for _, k := range []string{"author", "max_tokens", "tokens", "input_tokens", "key", "signature", "subject", "body", "passenger", "id"} {
		if redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true", k)
		}
	}
}

func TestValueKeys(t *testing.T) {
	long := strings.Repeat("y", 1000)
	in := map[string]any{
		"password":      "hunter2",
		"API-Key":       float64(12345), // any type is replaced
		"credentials":   map[string]any{"user": "bob", "pass": "x"},
		"Authorization": "Bearer abc",
		"body":          long,
		"bodyText":      long,
		"body_text":     long,
		"HTML":          "<p>" + long,
		"htmlBody":      long,
		"content":       []any{map[string]any{"type": "text", "text": long}},
		"markdown":      long,
		"subject":       long,
		"count":         float64(3),
		"ok":            true,
		"none":          nil,
		"note":          "login with password=hunter2 today",
	}
	orig := deepCopy(t, in)
	got := redact.Value(in).(map[string]any)
	if !reflect.DeepEqual(in, orig) {
		t.Fatal("Value modified its input")
	}
	snip := strings.Repeat("y", redact.SnippetLen-1) + "…"
	want := map[string]any{
		"password":      redact.Mask,
		"API-Key":       redact.Mask,
		"credentials":   redact.Mask,
		"Authorization": redact.Mask,
		"body":          snip,
		"bodyText":      snip,
		"body_text":     snip,
		"HTML":          "<p>" + strings.Repeat("y", redact.SnippetLen-4) + "…",
		"htmlBody":      snip,
		"content":       []any{map[string]any{"type": "text", "text": snip}},
		"markdown":      snip,
		"subject":       strings.Repeat("y", redact.MaxStringLen-1) + "…",
		"count":         float64(3),
		"ok":            true,
		"none":          nil,
		"note":          "login with password=[REDACTED] today",
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s = %#v, want %#v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d keys, want %d", len(got), len(want))
	}
	if again := redact.Value(got); !reflect.DeepEqual(again, got) {
		t.Error("Value is not idempotent")
	}
}

// nest wraps v in n-1 single-key objects, so that v sits at depth n.
func nest(v any, n int) any {
	for range n - 1 {
		v = map[string]any{"k": v}
	}
	return v
}

func keysObj(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("k%03d", i)] = float64(i)
	}
	return m
}

func items(n int) []any {
	a := make([]any, n)
	for i := range a {
		a[i] = float64(i)
	}
	return a
}

func TestValueCaps(t *testing.T) {
	// Each cap is hit by a container nested at depth MaxDepth, the deepest
	// that is still kept.
	deep := redact.MaxDepth
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"array at the cap", nest(items(50), deep), nest(items(50), deep)},
		{"array over the cap", nest(items(60), deep), nest(append(items(49), "[11 more items dropped]"), deep)},
		{"object at the cap", nest(keysObj(100), deep), nest(keysObj(100), deep)},
		{"object over the cap", nest(keysObj(130), deep), nest(func() any {
			m := keysObj(99)
			m[redact.TruncatedKey] = "31 keys dropped"
			return m
		}(), deep)},
		{"depth at the cap", nest(map[string]any{"leaf": "v"}, deep), nest(map[string]any{"leaf": "v"}, deep)},
		{"depth over the cap", nest(map[string]any{"leaf": "v", "x": 1.0}, deep+1),
			nest("[object of 2 keys dropped: nested deeper than 8]", deep+1)},
		{"array over the depth cap", nest([]any{1.0}, deep+1), nest("[array of 1 items dropped: nested deeper than 8]", deep+1)},
		{"secret and snippet rules still apply at depth", nest(map[string]any{"token": "t", "content": strings.Repeat("c", 200)}, deep),
			nest(map[string]any{"token": redact.Mask, "content": strings.Repeat("c", 119) + "…"}, deep)},
		{"keys merged after redaction", map[string]any{"Bearer abc": 1.0, "Bearer xyz": 2.0},
			map[string]any{"Bearer [REDACTED]": 1.0, redact.TruncatedKey: "1 keys dropped"}},
		{"a real key named like the marker yields when keys are dropped", func() any {
			m := keysObj(100)
			m[redact.TruncatedKey] = "mine"
			return m
		}(), func() any {
			m := keysObj(99)
			m[redact.TruncatedKey] = "2 keys dropped"
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.Value(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				a, _ := json.Marshal(got)
				b, _ := json.Marshal(tc.want)
				t.Fatalf("got  %.400s\nwant %.400s", a, b)
			}
			if again := redact.Value(got); !reflect.DeepEqual(again, got) {
				t.Error("not idempotent")
			}
		})
	}
}

type toolArgs struct {
	To       []string          `json:"to"`
	Password string            `json:"password"`
	Headers  map[string]string `json:"headers"`
}

func TestValueGoTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"struct through json", toolArgs{To: []string{"a@example.com"}, Password: "p", Headers: map[string]string{"Cookie": "c"}},
			map[string]any{"to": []any{"a@example.com"}, "password": redact.Mask, "headers": map[string]any{"Cookie": redact.Mask}}},
		{"raw json", json.RawMessage(`{"token":"t","n":12345678901234567890}`), map[string]any{"token": redact.Mask, "n": json.Number("12345678901234567890")}},
		{"error", errors.New("dial https://u:p@h failed"), "dial https://[REDACTED]@h failed"},
		{"nan", math.NaN(), "NaN"},
		{"inf", math.Inf(1), "+Inf"},
		{"int kept", 42, 42},
		{"nil map", map[string]string(nil), nil},
		{"channel", make(chan int), "[unserializable chan int dropped]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.Value(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Fatalf("result does not marshal: %v", err)
			}
		})
	}
}

func deepCopy(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	out := maps.Clone(v)
	for k, x := range out {
		raw, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		var c any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		out[k] = c
	}
	return out
}

func ExampleValue() {
	payload := map[string]any{
		"to":      "anna@example.com",
		"api_key": "abc123",
		"body":    strings.Repeat("Dear Anna, ", 20),
		"note":    "fetched https://bob:hunter2@example.com/x?token=t0k",
	}
	out, _ := json.MarshalIndent(redact.Value(payload), "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "api_key": "[REDACTED]",
	//   "body": "Dear Anna, Dear Anna, Dear Anna, Dear Anna, Dear Anna, Dear Anna, Dear Anna, Dear Anna, Dear Anna, Dear Anna, Dear Anna…",
	//   "note": "fetched https://[REDACTED]@example.com/x?token=[REDACTED]",
	//   "to": "anna@example.com"
	// }
}

func TestChainedNames(t *testing.T) {
	for in, want := range map[string]string{
		"token: API_KEY: abc":   "token: API_KEY: [REDACTED]",
		"token: secret:= abc":   "token: secret:= [REDACTED]",
		"token= Cookie: a=b; c": "token= Cookie: [REDACTED]",
		"token: foo: abc":       "token: [REDACTED] abc", // foo is not a secret name, so it is the value
	} {
		if got := redact.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}
