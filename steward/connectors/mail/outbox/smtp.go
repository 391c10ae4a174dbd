package outbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"strconv"
	"time"

	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/writeops"
)

// DefaultSMTPTimeout bounds one submission when the context has no deadline.
const DefaultSMTPTimeout = 2 * time.Minute

// SMTPSender submits messages to an account's SMTP server (RFC 6409).
type SMTPSender struct {
	// Lookup resolves the variable named by smtp.password_env (the
	// environment, then config.env); config.Config.Lookup is one.
	Lookup func(name string) (string, bool)
	// TLS overrides the TLS configuration (tests trust their own CA).
	TLS *tls.Config
	// Timeout bounds a submission (DefaultSMTPTimeout when zero).
	Timeout time.Duration
	// HelloName is sent in EHLO ("localhost" when empty).
	HelloName string
}

// Describe says where an account submits, or why it cannot.
func (s *SMTPSender) Describe(a *stewardmail.Account) (string, error) {
	if a.SMTP == nil {
		return "", fmt.Errorf("no smtp settings in mail.yaml for account %s", a.Name)
	}
	if a.SMTP.PasswordEnv != "" {
		if v, ok := s.Lookup(a.SMTP.PasswordEnv); !ok || v == "" {
			return "", fmt.Errorf("smtp password variable %s is not set (put it in the environment or STEWARD_HOME/config.env)", a.SMTP.PasswordEnv)
		}
	}
	return fmt.Sprintf("smtp %s:%d (%s)", a.SMTP.Host, a.SMTP.Port, a.SMTP.Security), nil
}

// Submit sends raw to rcpts from from. An error wrapped with
// writeops.NotDone means the server did not accept the message (refused a
// command, rejected the data, or the connection failed before the data was
// complete); any other error leaves it unknown whether the server accepted it.
func (s *SMTPSender) Submit(ctx context.Context, a *stewardmail.Account, from string, rcpts []string, raw []byte) error {
	cfg := a.SMTP
	if cfg == nil {
		return writeops.NotDone(fmt.Errorf("account %s has no smtp settings", a.Name))
	}
	var password string
	if cfg.PasswordEnv != "" {
		v, ok := s.Lookup(cfg.PasswordEnv)
		if !ok || v == "" {
			return writeops.NotDone(fmt.Errorf("smtp password variable %s is not set", cfg.PasswordEnv))
		}
		password = v
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultSMTPTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	tlsCfg := s.tlsConfig(cfg.Host)
	dialer := &net.Dialer{Deadline: deadline}
	var conn net.Conn
	var err error
	if cfg.Security == stewardmail.SMTPTLS {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return writeops.NotDone(fmt.Errorf("connect to smtp %s: %w", addr, err))
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := smtp.NewClient(conn, cfg.Host)
	if err != nil {
		conn.Close()
		return writeops.NotDone(fmt.Errorf("smtp %s greeting: %w", addr, err))
	}
	defer c.Close()
	step := func(what string, err error) error {
		if err == nil {
			return nil
		}
		return writeops.NotDone(fmt.Errorf("smtp %s %s: %w", addr, what, serverErr(err)))
	}
	hello := s.HelloName
	if hello == "" {
		hello = "localhost"
	}
	if err := step("EHLO", c.Hello(hello)); err != nil {
		return err
	}
	if cfg.Security == stewardmail.SMTPStartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return writeops.NotDone(fmt.Errorf("smtp %s does not offer STARTTLS; refusing to send in clear", addr))
		}
		if err := step("STARTTLS", c.StartTLS(tlsCfg)); err != nil {
			return err
		}
	}
	if cfg.Username != "" {
		if err := step("AUTH", c.Auth(smtp.PlainAuth("", cfg.Username, password, cfg.Host))); err != nil {
			return err
		}
	}
	if err := step("MAIL FROM", c.Mail(from)); err != nil {
		return err
	}
	for _, r := range rcpts {
		if err := step("RCPT TO "+r, c.Rcpt(r)); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err := step("DATA", err); err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		// The terminating dot was never sent, so the server cannot have
		// accepted the message.
		return writeops.NotDone(fmt.Errorf("smtp %s: connection failed while sending the message: %w", addr, err))
	}
	if err := w.Close(); err != nil {
		var te *textproto.Error
		if errors.As(err, &te) {
			return writeops.NotDone(fmt.Errorf("smtp %s rejected the message: %w", addr, serverErr(err)))
		}
		return fmt.Errorf("smtp %s: no answer after the message was sent (it may or may not have been accepted): %w", addr, err)
	}
	c.Quit() // the message is accepted; a failed QUIT changes nothing
	return nil
}

// serverErr shows a server reply as the server wrote it ("535 5.7.8 …").
func serverErr(err error) error {
	var te *textproto.Error
	if errors.As(err, &te) {
		return fmt.Errorf("%03d %s", te.Code, te.Msg)
	}
	return err
}

func (s *SMTPSender) tlsConfig(host string) *tls.Config {
	if s.TLS != nil {
		c := s.TLS.Clone()
		if c.ServerName == "" {
			c.ServerName = host
		}
		return c
	}
	return &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
}
