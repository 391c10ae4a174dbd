package host

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// handlePair gives the host token to a page the host served to a browser on
// this machine, so that the local app pairs itself. Every other caller is
// refused and pairs by entering the token once:
//   - the connection must be plain HTTP (the loopback listener), never
//     the HTTPS listener on all interfaces;
//   - the connection must come from a loopback address and not through a
//     proxy (no Forwarded / X-Forwarded-For);
//   - the Host header must name the loopback interface, which defeats DNS
//     rebinding (a foreign site resolving its name to 127.0.0.1 would be
//     "same-origin" with itself);
//   - the request must be a same-origin fetch from the host's own page
//     (Sec-Fetch-Site: same-origin, or a matching Origin where browsers do
//     not send Sec-Fetch-*), not a navigation, so another site cannot read
//     it and a typed URL does not show it.
//
// The token travels only in the JSON body, never in a URL.
func (h *Host) handlePair(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if reason := pairRefusal(r); reason != "" {
		writeJSONError(w, http.StatusForbidden, reason)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"token": h.Token()})
}

func pairRefusal(r *http.Request) string {
	const other = "automatic pairing is only for the app opened on this computer; enter the token from STEWARD_HOME/auth-token instead"
	// The HTTPS listener faces the network: a proxy or tunnel on this
	// machine would make every remote caller look like loopback.
	if r.TLS != nil {
		return "automatic pairing is never offered over HTTPS; scan the code `steward pair` prints or enter the token"
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || !isLoopbackIP(host) {
		return other
	}
	if r.Header.Get("Forwarded") != "" || r.Header.Get("X-Forwarded-For") != "" {
		return other
	}
	if !isLoopbackHost(r.Host) {
		return other
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); {
	case site == "same-origin":
	case site == "" && r.Header.Get("Origin") != "":
		u, err := url.Parse(r.Header.Get("Origin"))
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return other
		}
	default:
		return "pairing is answered only to the Steward page itself"
	}
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode == "navigate" {
		return "pairing is answered only to the Steward page itself"
	}
	return ""
}

func isLoopbackIP(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.IsLoopback()
}

// isLoopbackHost reports whether a Host header names this machine's
// loopback interface: localhost or a loopback IP, with an optional port.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || isLoopbackIP(host)
}
