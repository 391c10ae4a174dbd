package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/config"
)

// Webfetch bounds.
const (
	// WebfetchMaxBytes bounds a fetched body.
	WebfetchMaxBytes = 1 << 20
	// WebfetchShownBytes bounds the text a result shows.
	WebfetchShownBytes = 48 << 10
	// WebfetchTimeout bounds one fetch, redirects included.
	WebfetchTimeout = 30 * time.Second
	// WebfetchMaxRedirects bounds followed redirects.
	WebfetchMaxRedirects = 5
)

func init() { register("webfetch", webfetchTool) }

// NewWebClient returns the bounded HTTP client webfetch uses by default.
func NewWebClient() *http.Client {
	return &http.Client{Timeout: WebfetchTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= WebfetchMaxRedirects {
			return fmt.Errorf("more than %d redirects", WebfetchMaxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %s URL refused", req.URL.Scheme)
		}
		return nil
	}}
}

type fetchArgs struct {
	URL string `json:"url"`
}

var (
	scriptRe = regexp.MustCompile(`(?is)<(script|style|noscript)[^>]*>.*?</(script|style|noscript)>`)
	tagRe    = regexp.MustCompile(`(?s)<[^>]*>`)
	blankRe  = regexp.MustCompile(`\n[ \t]*\n(?:[ \t]*\n)+`)
)

// htmlText reduces HTML to readable text.
func htmlText(s string) string {
	s = scriptRe.ReplaceAllString(s, "")
	s = tagRe.ReplaceAllString(s, "")
	for _, r := range [][2]string{{"&nbsp;", " "}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", `"`}, {"&#39;", "'"}, {"&amp;", "&"}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return strings.TrimSpace(blankRe.ReplaceAllString(s, "\n\n"))
}

func textual(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct == ""
	}
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "json") || strings.HasSuffix(mt, "xml") ||
		mt == "application/javascript" || mt == "application/x-yaml" || mt == "application/yaml"
}

func webfetchTool(env *Env) agent.Tool {
	return tool(spec("webfetch", "Fetch an http(s) URL and return its text (HTML is reduced to text). Bodies over 1 MiB and binary content are refused. "+
		"URLs in the result have credentials, query and fragment removed.",
		`{"type":"object","properties":{"url":{"type":"string","minLength":1}},"required":["url"],"additionalProperties":false}`),
		func(ctx context.Context, a fetchArgs) (agent.ToolResult, error) {
			u, err := url.Parse(strings.TrimSpace(a.URL))
			shown := config.RedactURL(a.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return failf("%s is not an absolute http(s) URL", shown), nil
			}
			client := env.HTTPClient
			if client == nil {
				client = NewWebClient()
			}
			ctx, cancel := context.WithTimeout(ctx, WebfetchTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
			if err != nil {
				return failf("%s: %v", shown, err), nil
			}
			req.Header.Set("User-Agent", "saivage-webfetch/1")
			req.Header.Set("Accept", "text/html, text/plain, application/json, */*;q=0.5")
			resp, err := client.Do(req)
			if err != nil {
				var ue *url.Error
				if errors.As(err, &ue) {
					err = ue.Err // the URL may carry credentials
				}
				return failf("fetch %s: %v", shown, err), nil
			}
			defer resp.Body.Close()
			final := config.RedactURL(resp.Request.URL.String())
			ct := resp.Header.Get("Content-Type")
			if resp.StatusCode/100 != 2 {
				return failf("fetch %s: HTTP %d", final, resp.StatusCode), nil
			}
			if !textual(ct) {
				return failf("fetch %s: content type %q is not text", final, ct), nil
			}
			body, err := io.ReadAll(io.LimitReader(resp.Body, WebfetchMaxBytes+1))
			if err != nil {
				return failf("fetch %s: %v", final, err), nil
			}
			if len(body) > WebfetchMaxBytes {
				return failf("fetch %s: the body is larger than %d bytes", final, WebfetchMaxBytes), nil
			}
			text := strings.ToValidUTF8(string(body), "\uFFFD")
			if mt, _, _ := mime.ParseMediaType(ct); mt == "text/html" {
				text = htmlText(text)
			}
			text = env.redact(text)
			note := ""
			if len(text) > WebfetchShownBytes {
				cut := WebfetchShownBytes
				for cut > 0 && !utf8.RuneStart(text[cut]) {
					cut--
				}
				note = fmt.Sprintf("\n…[truncated: showing %d of %d bytes]", cut, len(text))
				text = text[:cut]
			}
			return ok(fmt.Sprintf("URL: %s\nStatus: %d\nContent-Type: %s\n\n%s%s", final, resp.StatusCode, ct, text, note)), nil
		})
}
