// Package smtptest runs SMTP servers for tests: a real OpenSMTPD process on
// loopback that delivers every recipient into one Maildir, and a small
// in-process server that misbehaves on purpose (refuses AUTH, drops the
// connection in the middle of DATA, never answers the final dot).
package smtptest

import (
	"bufio"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is the part of testing.TB the helpers use; the package does not import
// testing, so the benchmark sink can live in the steward binary.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
}

// OpenSMTPD is a running smtpd.
type OpenSMTPD struct {
	Port    int
	Maildir string // every delivered message lands in Maildir/new
	Log     string
	cmd     *exec.Cmd
}

// lockPath serialises smtpd instances across test binaries: OpenSMTPD has
// one spool and one control socket per machine.
const lockPath = "/tmp/steward-opensmtpd.lock"

// StartOpenSMTPD starts smtpd (Debian's opensmtpd) listening on a free
// loopback port. It skips the test when smtpd is not installed, and it must
// run as root (smtpd drops privileges itself; deliveries run as nobody).
func StartOpenSMTPD(t TB) *OpenSMTPD {
	t.Helper()
	bin, err := exec.LookPath("smtpd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/smtpd", "/sbin/smtpd"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		t.Skip("opensmtpd is not installed (apt-get install opensmtpd)")
	}
	if os.Geteuid() != 0 {
		t.Skip("smtpd needs root to start")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no nobody user for smtpd deliveries")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })

	dir, err := os.MkdirTemp("", "smtpd-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &OpenSMTPD{Maildir: filepath.Join(dir, "Maildir"), Log: filepath.Join(dir, "smtpd.log")}
	for _, sub := range []string{"", "new", "cur", "tmp"} {
		p := filepath.Join(s.Maildir, sub)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, -1)
	}
	s.Port = freePort(t)
	conf := filepath.Join(dir, "smtpd.conf")
	content := fmt.Sprintf(`table vusers { "@" = "nobody" }
listen on 127.0.0.1 port %d
action "deliver" maildir "%s" user nobody virtual <vusers>
match from any for any action "deliver"
`, s.Port, s.Maildir)
	if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, "-d", "-f", conf)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.Log)
			t.Fatalf("smtpd did not listen on %s: %s", s.Addr(), b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Addr is the listening address.
func (s *OpenSMTPD) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

func freePort(t TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Delivered is one delivered copy.
type Delivered struct {
	Path      string
	MessageID string
	Subject   string
	Header    mail.Header
}

// Messages reads the delivered copies (one per recipient).
func (s *OpenSMTPD) Messages(t TB) []Delivered {
	t.Helper()
	var out []Delivered
	for _, sub := range []string{"new", "cur"} {
		entries, err := os.ReadDir(filepath.Join(s.Maildir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(s.Maildir, sub, e.Name())
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			m, err := mail.ReadMessage(f)
			f.Close()
			if err != nil {
				t.Fatalf("delivered %s: %v", p, err)
			}
			subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
			if err != nil {
				subject = m.Header.Get("Subject")
			}
			out = append(out, Delivered{Path: p, MessageID: strings.Trim(m.Header.Get("Message-Id"), "<>"),
				Subject: subject, Header: m.Header})
		}
	}
	return out
}

// WaitMessages polls until at least n copies were delivered.
func (s *OpenSMTPD) WaitMessages(t TB, n int) []Delivered {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := s.Messages(t)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.Log)
			t.Fatalf("%d of %d messages delivered after 60 s; smtpd log:\n%s", len(got), n, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Fault is how the in-process server misbehaves.
type Fault int

// Faults.
const (
	FaultNone       Fault = iota
	FaultAuth             // 535 to AUTH
	FaultDropInData       // close the connection after reading part of DATA
	FaultNoFinalAck       // read the whole message, then close without answering
	FaultRejectData       // 554 after the final dot
)

// Fake is an in-process SMTP server with a chosen fault. It records the
// messages it accepted (set Discard to keep none).
type Fake struct {
	Addr  string
	Port  int
	fault Fault
	l     net.Listener
	mu    sync.Mutex
	got   []string
	// Discard keeps accepted messages out of memory (benchmarks).
	Discard bool
}

// StartFake starts a fake server on loopback, closed when the test ends.
func StartFake(t TB, fault Fault) *Fake {
	f, err := NewFake(fault)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// NewFake starts a fake server on loopback (also the benchmarks' sink).
func NewFake(fault Fault) (*Fake, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Fake{Addr: l.Addr().String(), Port: l.Addr().(*net.TCPAddr).Port, fault: fault, l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f, nil
}

// Close stops accepting connections.
func (f *Fake) Close() error { return f.l.Close() }

// Accepted returns the message data the server acknowledged.
func (f *Fake) Accepted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

func (f *Fake) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	say := func(s string) { fmt.Fprintf(c, "%s\r\n", s) }
	say("220 fake ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"):
			say("250-fake")
			say("250 AUTH PLAIN")
		case strings.HasPrefix(cmd, "AUTH"):
			if f.fault == FaultAuth {
				say("535 5.7.8 Authentication credentials invalid")
				continue
			}
			say("235 2.7.0 ok")
		case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RCPT"), strings.HasPrefix(cmd, "RSET"):
			say("250 ok")
		case cmd == "DATA":
			say("354 go ahead")
			var data strings.Builder
			for n := 0; ; n++ {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if f.fault == FaultDropInData && n == 3 {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(l)
			}
			switch f.fault {
			case FaultNoFinalAck:
				return
			case FaultRejectData:
				say("554 5.6.0 message refused: policy")
				continue
			}
			if !f.Discard {
				f.mu.Lock()
				f.got = append(f.got, data.String())
				f.mu.Unlock()
			}
			say("250 2.0.0 queued")
		case cmd == "QUIT":
			say("221 bye")
			return
		default:
			say("502 unknown")
		}
	}
}
