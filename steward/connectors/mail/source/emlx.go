package source

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"howett.net/plist"
)

// maxTrailer bounds the plist trailer read from an .emlx file.
const maxTrailer = 1 << 20

// EMLX is an opened Apple Mail .emlx or .partial.emlx file: a byte-count
// line, the RFC 822 message, then an XML property list with Mail's flags.
type EMLX struct {
	f *os.File
	// Message reads the RFC 822 message.
	Message io.Reader
	// Flags are Mail's flags from the trailer; FlagsKnown is false when the
	// trailer is missing or unreadable.
	Flags      Flags
	FlagsKnown bool
	// Received is the trailer's date-received, zero when absent.
	Received time.Time
	// ConversationID is Apple Mail's own conversation number, 0 when absent.
	ConversationID int64
	// RemoteID is the server's message UID, "" when absent.
	RemoteID string
	// Warnings describe repairs: a wrong byte count, a missing trailer.
	Warnings []string
}

// Close closes the file.
func (e *EMLX) Close() error { return e.f.Close() }

// OpenEMLX opens path and locates the message and its trailer. A broken file
// (no byte count, a count past the end, a damaged plist) is opened with
// warnings and the usable part; only an unreadable or empty file is an error.
func OpenEMLX(path string) (*EMLX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open emlx %s: %w", path, err)
	}
	e, err := readEMLX(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read emlx %s: %w", path, err)
	}
	return e, nil
}

func readEMLX(f *os.File) (*EMLX, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, errors.New("file is empty")
	}
	e := &EMLX{f: f}
	first, err := bufio.NewReaderSize(f, 64).ReadSlice('\n')
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	count, countErr := strconv.ParseInt(strings.TrimSpace(string(first)), 10, 64)
	start := int64(len(first))
	if countErr != nil || count < 0 || len(first) == 0 || first[len(first)-1] != '\n' {
		// No byte-count line: the message starts at the top.
		e.warn("no byte-count line; the message is read from the start of the file")
		start, count = 0, -1
	} else if start+count > size {
		e.warn(fmt.Sprintf("byte count %d runs past the end of the file (%d bytes left); the message may be truncated", count, size-start))
		count = -1
	}
	end := size
	if count >= 0 {
		end = start + count
	} else if t := findTrailer(f, start, size); t >= 0 {
		end = t
	}
	if end < size {
		e.readTrailer(io.NewSectionReader(f, end, min(size-end, maxTrailer)))
	} else {
		e.warn("no plist trailer; Mail's flags are unknown")
	}
	e.Message = io.NewSectionReader(f, start, end-start)
	return e, nil
}

func (e *EMLX) warn(s string) { e.Warnings = append(e.Warnings, s) }

// findTrailer looks for the start of the plist trailer in the last part of
// the file, for files whose byte count cannot be trusted.
func findTrailer(f *os.File, start, size int64) int64 {
	from := max(start, size-maxTrailer)
	buf := make([]byte, size-from)
	if _, err := f.ReadAt(buf, from); err != nil && err != io.EOF {
		return -1
	}
	i := bytes.LastIndex(buf, []byte("<?xml version="))
	if i < 0 || (i > 0 && buf[i-1] != '\n') {
		return -1
	}
	return from + int64(i)
}

func (e *EMLX) readTrailer(r io.Reader) {
	data, err := io.ReadAll(r)
	if err != nil {
		e.warn("plist trailer unreadable: " + err.Error())
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		e.warn("no plist trailer; Mail's flags are unknown")
		return
	}
	var meta map[string]any
	if _, err := plist.Unmarshal(data, &meta); err != nil {
		e.warn("plist trailer is not a valid property list; Mail's flags are unknown")
		return
	}
	if v, ok := plistInt(meta["flags"]); ok {
		e.Flags, e.FlagsKnown = AppleFlags(uint64(v)), true
	}
	if v, ok := plistInt(meta["date-received"]); ok && v > 0 {
		e.Received = time.Unix(v, 0).UTC()
	}
	if v, ok := plistInt(meta["conversation-id"]); ok {
		e.ConversationID = v
	}
	switch v := meta["remote-id"].(type) {
	case string:
		e.RemoteID = v
	case uint64, int64, float64:
		if n, ok := plistInt(v); ok {
			e.RemoteID = strconv.FormatInt(n, 10)
		}
	}
}

func plistInt(v any) (int64, bool) {
	switch n := v.(type) {
	case uint64:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		return int64(n), true
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return i, err == nil
	}
	return 0, false
}

// Flags are the states a mail client records for a message.
type Flags struct {
	Seen, Answered, Flagged, Draft, Deleted, Forwarded, Junk bool
}

// AppleFlags decodes the bit field of an .emlx trailer's "flags" key.
func AppleFlags(v uint64) Flags {
	return Flags{
		Seen:      v&(1<<0) != 0,
		Deleted:   v&(1<<1) != 0,
		Answered:  v&(1<<2) != 0,
		Flagged:   v&(1<<4) != 0,
		Draft:     v&(1<<6) != 0,
		Forwarded: v&(1<<8) != 0,
		Junk:      v&(1<<24) != 0,
	}
}

// MaildirFlags decodes the info part of a Maildir filename ("…:2,FRS").
// Messages in new/ have no info and are unseen.
func MaildirFlags(info string) Flags {
	var f Flags
	for _, c := range info {
		switch c {
		case 'S':
			f.Seen = true
		case 'R':
			f.Answered = true
		case 'F':
			f.Flagged = true
		case 'D':
			f.Draft = true
		case 'T':
			f.Deleted = true
		case 'P':
			f.Forwarded = true
		}
	}
	return f
}
