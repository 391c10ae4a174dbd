package source

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail/message"
)

// Body states, as the mirror records them.
const (
	BodyFull    = "full"
	BodyPartial = "partial"
	BodyNone    = "none"
)

// Item is a message file read and parsed.
type Item struct {
	Entry
	Msg *message.Message
	// BodyState is full for a complete file, partial for a .partial.emlx with
	// usable text and none for one without.
	BodyState string
	// Apple Mail metadata from the .emlx trailer, when present.
	ConversationID int64
	RemoteID       string
	// Warnings joins the file-level and MIME-level repairs.
	Warnings []string
}

// Read opens and parses the message file of e. Maildir flags come from the
// filename, .emlx flags from the trailer. The error is non-nil only when the
// file cannot be read or holds no message at all.
func Read(e Entry, opts message.Options) (*Item, error) {
	it := &Item{Entry: e, BodyState: BodyFull}
	var r io.Reader
	var received time.Time // Mail's date-received, for messages without a Date
	switch e.Format {
	case FormatEMLX, FormatPartialEMLX:
		x, err := OpenEMLX(e.Path)
		if err != nil {
			return nil, err
		}
		defer x.Close()
		r = x.Message
		it.Warnings = append(it.Warnings, x.Warnings...)
		if x.FlagsKnown {
			it.Flags, it.FlagsKnown = x.Flags, true
		}
		it.ConversationID, it.RemoteID, received = x.ConversationID, x.RemoteID, x.Received
		if e.Format == FormatPartialEMLX && opts.External == nil {
			opts.External = AppleAttachments(e.Path)
		}
	default:
		f, err := os.Open(e.Path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", e.Path, err)
		}
		defer f.Close()
		r = f
	}
	msg, err := message.Parse(r, opts)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", e.Path, err)
	}
	it.Msg = msg
	if msg.Date.IsZero() {
		msg.Date = received
	}
	it.Warnings = append(it.Warnings, msg.Warnings...)
	if e.Format == FormatPartialEMLX {
		if strings.TrimSpace(msg.Text) != "" {
			it.BodyState = BodyPartial
		} else {
			it.BodyState = BodyNone
		}
	}
	return it, nil
}

var (
	partRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,4}){0,16}$`) })
	keyRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,18}$`) })
)

// AppleAttachments returns the lookup of the parts a .partial.emlx left out:
// Mail keeps them as Attachments/<number>/<part>/<filename> beside Messages/.
// Part and number are checked to be digits, so a hostile message cannot make
// the lookup leave that folder.
func AppleAttachments(emlxPath string) func(part, filename string) (io.ReadCloser, error) {
	key := EMLXKey(filepath.Base(emlxPath))
	base := filepath.Join(filepath.Dir(filepath.Dir(emlxPath)), "Attachments", key)
	return func(part, filename string) (io.ReadCloser, error) {
		if !partRe().MatchString(part) || !keyRe().MatchString(key) {
			return nil, fmt.Errorf("attachment part %q of %s: %w", part, key, os.ErrNotExist)
		}
		dir := filepath.Join(base, part)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var pick string
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			if e.Name() == filename || pick == "" {
				pick = e.Name()
			}
		}
		if pick == "" {
			return nil, fmt.Errorf("attachment part %s of %s: %w", part, key, os.ErrNotExist)
		}
		return os.Open(filepath.Join(dir, pick))
	}
}
