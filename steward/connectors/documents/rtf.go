package documents

import (
	"bytes"
	"strconv"
	"strings"

	"golang.org/x/text/encoding/charmap"
)

// rtfSkipDestinations are groups holding tables, metadata or binary data
// rather than document text.
var rtfSkipDestinations = map[string]bool{
	"fonttbl": true, "colortbl": true, "stylesheet": true, "info": true, "pict": true, "object": true,
	"themedata": true, "colorschememapping": true, "datastore": true, "latentstyles": true,
	"listtable": true, "listoverridetable": true, "rsidtbl": true, "generator": true, "xmlnstbl": true,
	"mmathpr": true, "fldinst": true, "filetbl": true, "revtbl": true, "pgdsctbl": true, "bkmkstart": true,
	"bkmkend": true, "defchp": true, "defpap": true, "listtext": true, "pntext": true, "objdata": true,
	"blipuid": true, "nonshppict": true,
}

var rtfCodepages = map[int]*charmap.Charmap{
	437: charmap.CodePage437, 850: charmap.CodePage850, 1250: charmap.Windows1250, 1251: charmap.Windows1251,
	1252: charmap.Windows1252, 1253: charmap.Windows1253, 1254: charmap.Windows1254, 1255: charmap.Windows1255,
	1256: charmap.Windows1256, 1257: charmap.Windows1257, 1258: charmap.Windows1258, 10000: charmap.Macintosh,
}

const rtfMaxDepth = 512

// extractRTF converts RTF to plain text with a small tokenizer: groups,
// control words, hex escapes and \u Unicode escapes; destinations that are
// not body text (font tables, pictures, field instructions) are skipped.
func extractRTF(data []byte, out *textOut) error {
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte(`{\rtf`)) {
		return errorf(CodeMalformed, "not an RTF file: it must start with {\\rtf")
	}
	type state struct {
		skip bool
		uc   int
	}
	st := state{uc: 1}
	var stack []state
	cm := charmap.Windows1252
	skipChars := 0 // fallback characters still to drop after \uN
	var text strings.Builder
	flush := func() error {
		if text.Len() == 0 {
			return nil
		}
		err := out.write(text.String())
		text.Reset()
		return err
	}
	emit := func(s string) {
		if st.skip {
			return
		}
		if skipChars > 0 {
			skipChars--
			return
		}
		text.WriteString(s)
	}
	groupStart := false // the next control word is the first of its group
	for i := 0; i < len(data); {
		if text.Len() > 4096 {
			if err := flush(); err != nil {
				return err
			}
		}
		c := data[i]
		switch c {
		case '{':
			if len(stack) >= rtfMaxDepth {
				return errorf(CodeMalformed, "RTF groups nested deeper than %d", rtfMaxDepth)
			}
			stack = append(stack, st)
			groupStart = true
			skipChars = 0
			i++
			continue
		case '}':
			if len(stack) == 0 {
				i++ // unbalanced close: ignore, keep the text
				continue
			}
			st = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			skipChars = 0
			i++
			groupStart = false
			continue
		case '\r', '\n':
			i++
			continue
		case '\\':
			if i+1 >= len(data) {
				i++
				continue
			}
			n := data[i+1]
			switch {
			case isASCIILetter(n):
				j := i + 1
				for j < len(data) && isASCIILetter(data[j]) && j-i <= 32 {
					j++
				}
				word := strings.ToLower(string(data[i+1 : j]))
				k := j
				if k < len(data) && data[k] == '-' {
					k++
				}
				for k < len(data) && data[k] >= '0' && data[k] <= '9' && k-j < 11 {
					k++
				}
				param, hasParam := 0, k > j
				if hasParam {
					p, err := strconv.Atoi(string(data[j:k]))
					if err != nil {
						hasParam = false
					}
					param = p
				}
				if k < len(data) && data[k] == ' ' {
					k++
				}
				i = k
				first := groupStart
				groupStart = false
				switch word {
				case "par", "line", "row", "sect", "page", "pard":
					if word != "pard" {
						emit("\n")
					}
				case "tab", "cell":
					emit("\t")
				case "emdash":
					emit("—")
				case "endash":
					emit("–")
				case "bullet":
					emit("•")
				case "lquote":
					emit("‘")
				case "rquote":
					emit("’")
				case "ldblquote":
					emit("“")
				case "rdblquote":
					emit("”")
				case "uc":
					if hasParam && param >= 0 && param < 10 {
						st.uc = param
					}
				case "u":
					if hasParam {
						if param < 0 {
							param += 65536
						}
						r := rune(param)
						if r == 0 {
							r = '\uFFFD'
						}
						emit(string(r))
						skipChars = st.uc
					}
				case "ansicpg":
					if m, ok := rtfCodepages[param]; ok {
						cm = m
					}
				case "mac":
					cm = charmap.Macintosh
				case "bin":
					if hasParam && param > 0 {
						i = min(len(data), i+param) // binary payload, never text
					}
				default:
					if first && rtfSkipDestinations[word] {
						st.skip = true
					}
				}
				continue
			case n == '*':
				if groupStart {
					st.skip = true
				}
				i += 2
				continue
			case n == '\'':
				if i+4 <= len(data) {
					if b, err := strconv.ParseUint(string(data[i+2:i+4]), 16, 8); err == nil {
						emit(string(cm.DecodeByte(byte(b))))
					}
				}
				i += 4
				groupStart = false
				continue
			case n == '\\' || n == '{' || n == '}':
				emit(string(n))
			case n == '~':
				emit("\u00a0")
			case n == '_':
				emit("-")
			case n == '\n' || n == '\r':
				emit("\n")
			}
			i += 2
			groupStart = false
			continue
		}
		groupStart = false
		if c < 0x80 {
			if c >= 0x20 || c == '\t' {
				emit(string(rune(c)))
			}
		} else {
			emit(string(cm.DecodeByte(c)))
		}
		i++
	}
	return flush()
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
