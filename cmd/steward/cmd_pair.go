package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/pairing"
)

func init() {
	register(&command{
		Name:    "pair",
		Summary: "print the address and QR code a phone pairs with",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlagSet(env, "pair", "[--json]", `
Prints the address of the HTTPS listener (STEWARD_TLS_CERT / STEWARD_TLS_KEY, port
STEWARD_TLS_PORT) and a QR code of the pairing link: scan it with the phone's camera, open the
page and it is paired. The link carries the host token after '#', which the browser never sends
to any server; treat the QR code like the token itself. Rotate the token from the System page to
unpair every device.`)
			asJSON := fs.Bool("json", false, "print {url, link} as JSON instead of the QR code")
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
			token, err := host.LoadOrCreateToken(filepath.Join(sc.home, host.TokenFileName), sc.authToken)
			if err != nil {
				return err
			}
			base := fmt.Sprintf("http://127.0.0.1:%d", sc.hostPort)
			if sc.tlsCert != "" {
				certs, err := sc.certReloader(env.Log)
				if err != nil {
					return err
				}
				base = httpsURL(certs, sc.tlsPort)
			}
			link := pairing.Link(base, token)
			if *asJSON {
				return writeJSON(env.Stdout, map[string]any{"url": base, "link": link, "https": sc.tlsCert != ""})
			}
			if sc.tlsCert == "" {
				fmt.Fprintf(env.Stdout, "Steward answers only on this computer: %s\n\n"+
					"To pair a phone, give Steward a certificate for a name the phone reaches (for example\n"+
					"`tailscale cert mac.tailnet.ts.net`), set STEWARD_TLS_CERT and STEWARD_TLS_KEY in %s,\n"+
					"restart steward serve and run steward pair again.\n", base, filepath.Join(sc.home, "config.env"))
				return nil
			}
			qr, err := pairing.Terminal(link)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "Open on the phone: %s\nor scan (the code holds the host token; do not share it):\n\n%s\n", base, qr)
			return nil
		},
	})
}

// certReloader loads the HTTPS listener's certificate pair; errors name the
// setting at fault.
func (sc *serveConfig) certReloader(log *slog.Logger) (*host.CertReloader, error) {
	return host.NewCertReloader(host.CertOptions{CertFile: sc.tlsCert, KeyFile: sc.tlsKey,
		CertName: "STEWARD_TLS_CERT", KeyName: "STEWARD_TLS_KEY", Logger: log})
}

// httpsURL is the address a phone opens: the certificate's first DNS name
// (the one it is valid for), else its first IP address, else this machine's
// host name.
func httpsURL(certs *host.CertReloader, port int) string {
	name, _ := os.Hostname()
	if leaf := certs.Leaf(); leaf != nil {
		switch {
		case len(leaf.DNSNames) > 0:
			name = leaf.DNSNames[0]
		case len(leaf.IPAddresses) > 0:
			name = leaf.IPAddresses[0].String()
		}
	}
	return "https://" + net.JoinHostPort(name, strconv.Itoa(port))
}
