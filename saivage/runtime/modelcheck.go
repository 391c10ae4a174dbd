package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/agentstack/agentstack/saivage/config"
)

// CheckModelNames asks every provider (and account) that has a base URL
// for its model list (GET {baseUrl}/models, the OpenAI-compatible format
// Steward's gateway serves) and warns about each configured model name the
// endpoint does not list. An endpoint that cannot be asked gives one note
// saying the names were not checked. It never fails: a gateway that is not
// running yet is normal while configuring.
func CheckModelNames(ctx context.Context, cfg *config.Config, client *http.Client) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Providers)) {
		p := cfg.Providers[name]
		check := func(path, base, key string, models []string) {
			if base == "" || len(models) == 0 {
				return
			}
			served, err := listModels(ctx, client, base, key)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: model names not checked: %v", path, err))
				return
			}
			for _, m := range models {
				if !slices.Contains(served, m) {
					out = append(out, fmt.Sprintf("%s.models: %q is not a model of %s (it serves: %s)", path, m, base, strings.Join(served, ", ")))
				}
			}
		}
		check("providers."+name, p.BaseURL, p.APIKey, p.Models)
		for _, a := range slices.Sorted(maps.Keys(p.Accounts)) {
			acct := p.Accounts[a]
			base, key, models := cmp.Or(acct.BaseURL, p.BaseURL), cmp.Or(acct.APIKey, p.APIKey), acct.Models
			if len(models) == 0 {
				models = p.Models
			}
			if base == p.BaseURL && key == p.APIKey && slices.Equal(models, p.Models) {
				continue // asked above
			}
			check("providers."+name+".accounts."+a, base, key, models)
		}
	}
	return out
}

// listModels reads an OpenAI-compatible model list.
func listModels(ctx context.Context, client *http.Client, base, key string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/models", nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s is not reachable", base)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/models answered %s", strings.TrimRight(base, "/"), resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("%s/models is not an OpenAI-compatible model list", strings.TrimRight(base, "/"))
	}
	ids := make([]string, 0, len(list.Data))
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	sort.Strings(ids)
	return ids, nil
}
