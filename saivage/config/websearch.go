package config

import (
	"fmt"
	"net/url"
	"strings"
)

// WebSearch selects the backend of the websearch tool. It extends the
// spec's schema table (which leaves the search backend to the deployment);
// the SAIVAGE_WEBSEARCH_* environment variables are the other way to set
// it, and setting both is refused at start (see runtime.WebSearchBackend).
type WebSearch struct {
	// APIKey is the backend's key, normally a ${ENV_NAME} reference; it is
	// masked by Redact, joins the runtime's redacted secrets and is sent
	// only in a request header.
	APIKey string `yaml:"apiKey,omitempty"`
	// Backend is searxng, brave or tavily (required).
	Backend string `yaml:"backend,omitempty"`
	// URL is the endpoint root: required for searxng, an override of the
	// hosted providers' default endpoint otherwise.
	URL string `yaml:"url,omitempty"`
}

// Websearch backend names, as configuration spells them.
const (
	WebSearchSearXNG = "searxng"
	WebSearchBrave   = "brave"
	WebSearchTavily  = "tavily"
)

// WebSearchBackends lists the backend names, sorted.
func WebSearchBackends() []string {
	return []string{WebSearchBrave, WebSearchSearXNG, WebSearchTavily}
}

// CheckWebSearch checks a complete backend selection (an empty Backend is
// not defaulted here). The returned *Error's Path is the field relative to
// the section ("backend", "url" or "apiKey"); its message never contains
// the key or the URL, which may carry credentials.
func CheckWebSearch(w WebSearch) *Error {
	switch w.Backend {
	case WebSearchSearXNG:
		if w.URL == "" {
			return &Error{Path: "url", Msg: "websearch backend searxng needs the instance URL"}
		}
	case WebSearchBrave, WebSearchTavily:
		if w.APIKey == "" {
			return &Error{Path: "apiKey", Msg: fmt.Sprintf("websearch backend %s needs an API key", w.Backend)}
		}
	case "":
		return &Error{Path: "backend", Msg: fmt.Sprintf("required (%s)", strings.Join(WebSearchBackends(), ", "))}
	default:
		return &Error{Path: "backend", Msg: fmt.Sprintf("unknown websearch backend %q (allowed: %s)", w.Backend, strings.Join(WebSearchBackends(), ", "))}
	}
	if w.URL == "" {
		return nil
	}
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return &Error{Path: "url", Msg: fmt.Sprintf("websearch backend %s: the URL is not an absolute http(s) URL without credentials, query or fragment", w.Backend)}
	}
	return nil
}

func (v *validator) websearch(w *WebSearch) {
	if w == nil {
		return
	}
	if e := CheckWebSearch(*w); e != nil {
		v.fail("websearch."+e.Path, "%s", e.Msg)
	}
}
