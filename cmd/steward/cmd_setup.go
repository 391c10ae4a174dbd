package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/modelsetup"
)

func init() {
	register(&command{
		Name:    "setup",
		Summary: "choose the model provider (writes gateway.yaml and the key into config.env)",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlagSet(env, "setup", "[--base-url URL] [--model NAME] [--tier tier-N=NAME]… [--key-env VAR]", `
Chooses the model provider, as the web app's first-run screen does: any OpenAI-compatible API
(OpenAI, DeepSeek, OpenRouter, a local Ollama or llama.cpp server…). It sends one real chat request
to check the base URL, model and key, then writes STEWARD_HOME/gateway.yaml (the old one is kept
as gateway.yaml.bak) and the key into STEWARD_HOME/config.env as MODEL_API_KEY (mode 0600).
Every tier uses --model unless --tier names another model for it.
Asks on the terminal for what the options leave out; the key is read from the variable --key-env
names, or typed (it never goes on the command line).`)
			baseURL := fs.String("base-url", "", "the provider's OpenAI-compatible base URL, e.g. https://api.openai.com/v1")
			model := fs.String("model", "", "the provider's model name for the chat tier (HOST_TIER) and every tier not given with --tier")
			keyEnv := fs.String("key-env", "", "read the key from this environment variable; empty: ask (an empty answer means no key)")
			tiers := map[string]string{}
			fs.Func("tier", "tier-N=MODEL: another model for one tier (repeatable)", func(v string) error {
				t, m, ok := strings.Cut(v, "=")
				if !ok {
					return fmt.Errorf("want tier-N=MODEL, got %q", v)
				}
				tiers[strings.TrimSpace(t)] = strings.TrimSpace(m)
				return nil
			})
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			cfg, err := env.Config()
			if err != nil {
				return err
			}
			sc, err := readServeConfig(cfg)
			if err != nil {
				return err
			}
			in := bufio.NewReader(env.Stdin)
			if *baseURL == "" {
				*baseURL = ask(in, env.Stdout, "OpenAI-compatible base URL (e.g. https://api.openai.com/v1): ")
			}
			if *model == "" && tiers[sc.hostTier] == "" {
				*model = ask(in, env.Stdout, fmt.Sprintf("Model name for chats (%s): ", sc.hostTier))
			}
			var key string
			if *keyEnv != "" {
				v, ok := cfg.Lookup(*keyEnv)
				if !ok {
					return fmt.Errorf("--key-env %s: the variable is not set", *keyEnv)
				}
				key = v
			} else {
				key = ask(in, env.Stdout, "API key (empty for none): ")
			}
			c := modelsetup.Choice{BaseURL: *baseURL, APIKey: key, Models: map[string]string{}}
			for t, m := range tiers {
				c.Models[t] = m
			}
			if c.Models[sc.hostTier] == "" {
				c.Models[sc.hostTier] = *model
			}
			if c, err = c.Normalize(sc.hostTier); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "Testing %s with model %s…\n", c.BaseURL, c.Models[sc.hostTier])
			if err := modelsetup.Test(ctx, nil, c, sc.hostTier); err != nil {
				return fmt.Errorf("the test request failed, nothing was written: %w", err)
			}
			if err := modelsetup.Save(sc.home, sc.gatewayConfig, c); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "The provider answered. Wrote %s", sc.gatewayConfig)
			if key != "" {
				fmt.Fprintf(env.Stdout, " and %s in %s/config.env", modelsetup.KeyVar, sc.home)
			}
			fmt.Fprintln(env.Stdout, ".\nA running `steward serve` picks it up when you submit the first-run screen; otherwise restart it.")
			return nil
		},
	})
}

// ask prints prompt and returns the next line of in, trimmed ("" at EOF).
func ask(in *bufio.Reader, out io.Writer, prompt string) string {
	fmt.Fprint(out, prompt)
	line, _ := in.ReadString('\n')
	return strings.TrimSpace(line)
}

// setupOptions wires the first-run screen's routes: readiness of the chat
// tier, and a reload of the in-process gateway after a save.
func setupOptions(env *cliEnv, d hostDeps) modelsetup.Options {
	sc := d.sc
	opts := modelsetup.Options{Home: sc.home, GatewayConfig: sc.gatewayConfig, ChatTier: sc.hostTier}
	if d.gw == nil {
		// Another gateway: ask it, and let the user restart it.
		opts.Status = func() gateway.Readiness {
			st := host.ProbeHTTP(context.Background(), nil, "gateway", strings.TrimSuffix(d.gatewayURL, "/v1")+"/health?model="+url.QueryEscape(sc.hostTier))
			return gateway.Readiness{Model: sc.hostTier, Ready: st.State == host.StateOK, Problem: st.Detail}
		}
		return opts
	}
	opts.Status = func() gateway.Readiness { return d.gw.Current().Ready(sc.hostTier) }
	opts.Apply = func(ctx context.Context) error {
		// config.env is read again for the key just written.
		cfg, err := env.reloadConfig()
		if err != nil {
			return err
		}
		g, err := newGateway(sc, cfg.Lookup, d.ledger, d.log)
		if err != nil {
			return err
		}
		d.gw.Swap(g)
		d.log.Info("gateway configuration reloaded", "path", sc.gatewayConfig, "models", strings.Join(g.Models(), ","))
		return nil
	}
	return opts
}
