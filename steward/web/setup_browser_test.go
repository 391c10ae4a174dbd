package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/modelsetup"
)

// TestBrowserFirstRun starts with a gateway whose only provider lacks its
// key: the app shows the first-run screen, the user points it at the
// scripted OpenAI-compatible provider, the host tests it with one real
// request, writes gateway.yaml and config.env, reloads the gateway, and the
// next chat is answered — without a restart.
func TestBrowserFirstRun(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 860, false)
	h := newHarness(t)
	unusable, err := gateway.New(gateway.Options{Config: gateway.DefaultConfig(), Ledger: h.ledger})
	if err != nil {
		t.Fatal(err)
	}
	h.sw.Swap(unusable)
	gwPath := filepath.Join(h.home, "gateway.yaml")
	modelsetup.Mount(h.host.Handle, modelsetup.Options{
		Home: h.home, GatewayConfig: gwPath, ChatTier: "tier-5",
		Status: func() gateway.Readiness { return h.sw.Current().Ready("tier-5") },
		Apply: func(ctx context.Context) error {
			// As steward serve does: config.env again, then the new file.
			cfg, err := config.Load(config.LoadOptions{Getenv: func(k string) (string, bool) {
				if k == "STEWARD_HOME" {
					return h.home, true
				}
				return "", false
			}})
			if err != nil {
				return err
			}
			gcfg, _, err := gateway.LoadConfig(gwPath)
			if err != nil {
				return err
			}
			g, err := gateway.New(gateway.Options{Config: gcfg, LookupEnv: cfg.Lookup, Ledger: h.ledger})
			if err != nil {
				return err
			}
			h.sw.Swap(g)
			return nil
		},
	})

	b.do(chromedp.Navigate(h.url()))
	b.wait(`document.querySelector('.setup-view')?.dataset.loaded === '1'`)
	if got := eval[string](b, `document.getElementById('setup-problem').textContent`); !strings.Contains(got, "DEEPSEEK_API_KEY is not set") {
		t.Errorf("first-run screen says %q, want the missing key named", got)
	}
	if eval[bool](b, `!!document.getElementById('composer-input')`) {
		t.Error("a chat composer shows while no model is usable")
	}

	// A wrong model name: the provider's refusal is shown, nothing is written.
	b.setValue("#setup-base-url", h.provider.URL)
	b.setValue("#setup-key", "sk-first-run-key")
	b.setValue("#setup-tier-5", "missing-model")
	h.provider.Enqueue("missing-model", llmtest.Reply{Status: 404, ErrorMessage: "model missing-model does not exist"})
	clickSubmit(b)
	b.wait(`document.getElementById('setup-message').className === 'error'`)
	if got := eval[string](b, `document.getElementById('setup-message').textContent`); !strings.Contains(got, `does not know model "missing-model"`) {
		t.Errorf("failed test shows %q", got)
	}
	if _, err := os.Stat(gwPath); err == nil {
		t.Error("gateway.yaml written although the test request failed")
	}

	b.setValue("#setup-tier-5", "scripted-1")
	b.shot("first-run")
	clickSubmit(b)
	b.wait(`document.documentElement.dataset.setup === 'done' || (document.getElementById('setup-message')?.className === 'error' && !document.getElementById('setup-message').textContent.includes('missing-model'))`)
	if msg := eval[string](b, `document.documentElement.dataset.setup || document.getElementById('setup-message').textContent`); msg != "done" {
		t.Fatalf("set-up failed: %s", msg)
	}
	reqs := h.provider.Requests()
	last := reqs[len(reqs)-1]
	if last.Model != "scripted-1" || last.Header.Get("Authorization") != "Bearer sk-first-run-key" {
		t.Errorf("test request: model %q, Authorization %q", last.Model, last.Header.Get("Authorization"))
	}
	st, err := os.Stat(filepath.Join(h.home, "config.env"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("config.env mode %v, want 0600", st.Mode().Perm())
	}
	env, _ := os.ReadFile(filepath.Join(h.home, "config.env"))
	if string(env) != "MODEL_API_KEY=sk-first-run-key\n" {
		t.Errorf("config.env = %q", env)
	}
	y, _ := os.ReadFile(gwPath)
	if strings.Contains(string(y), "sk-first-run-key") || !strings.Contains(string(y), "api_key_env: MODEL_API_KEY") {
		t.Errorf("gateway.yaml:\n%s", y)
	}

	// The chat works now, through the reloaded gateway.
	b.wait(`!!document.getElementById('composer-input')`)
	b.send("Hello after set-up")
	b.lastAssistant("you said: Hello after set-up")
	b.noExceptions()
}

// clickSubmit clicks the set-up button through the DOM: the start-up
// search-preparation banner may lie over its on-screen spot.
func clickSubmit(b *browser) {
	b.t.Helper()
	eval[bool](b, `(document.getElementById('setup-submit').click(), true)`)
}
