package llm_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/agentstack/agentstack/llm"
)

// failingCredentials cannot supply a token.
type failingCredentials struct{ err error }

func (c failingCredentials) Token(context.Context) (string, error)           { return "", c.err }
func (c failingCredentials) Refresh(context.Context, string) (string, error) { return "", c.err }

// TestResponsesAttemptOrder: on the Responses protocols an attempt takes
// its credentials before it derives the protocol's wire body. A request
// whose body has no Responses mapping (a "function" message) fails on
// the credentials when they fail — reported as auth_refresh, nothing sent
// — and only with working credentials on the derivation (400, nothing
// sent).
func TestResponsesAttemptOrder(t *testing.T) {
	unmappable := weatherRequest()
	unmappable.Messages = append(unmappable.Messages, llm.Message{Role: "function", Content: "legacy"})
	for _, proto := range []llm.Protocol{llm.ProtocolResponses, llm.ProtocolCodex} {
		t.Run(string(proto), func(t *testing.T) {
			denied := errors.New("the token endpoint is unreachable")
			srv := newWireServer(t)
			f := &failures{}
			c := providerClient(srv, llm.ProviderTransportOptions{Credentials: failingCredentials{denied}, Failures: f, Models: protocolModels(proto, "")})
			_, err := c.Chat(context.Background(), unmappable)
			if !errors.Is(err, denied) {
				t.Fatalf("err = %v, want the credentials' failure first", err)
			}
			if got := f.all(); len(got) != 1 || got[0].Cause != "auth_refresh" || got[0].Endpoint != "/responses" {
				t.Errorf("failures = %+v", got)
			}
			if n := len(srv.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}

			c = providerClient(srv, llm.ProviderTransportOptions{Credentials: llm.StaticKey("sk-ok"), Models: protocolModels(proto, "")})
			_, err = c.Chat(context.Background(), unmappable)
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != "invalid_request" {
				t.Fatalf("err = %v, want the derivation's 400", err)
			}
			if n := len(srv.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}
