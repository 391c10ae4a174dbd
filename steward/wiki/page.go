// Package wiki is Steward's long-term memory: a folder of Markdown pages
// (an Obsidian-compatible vault) that the agent maintains and the user can
// read, edit and search. The files are primary; the SQLite index beside them
// (full text, trigram, vectors), the link graph and its communities are
// rebuilt from the files at any time.
//
// The package provides the vault model (pages, YAML frontmatter, wikilinks
// resolved as Obsidian resolves them), atomic writes under a per-vault lock,
// the index and hybrid search, lint, the graph with its relevance measure and
// Louvain communities, wiki-add (snapshot import with the collision table),
// the persistent two-step ingest queue, and the MCP tools and HTTP API that
// expose them.
package wiki

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Page types a Steward page's frontmatter may declare.
var PageTypes = []string{"source", "entity", "concept", "decision", "commitment", "person", "organization", "query", "overview"}

// Frontmatter is the YAML header of a page. Unknown keys are kept in Extra.
type Frontmatter struct {
	Title    string   `json:"title,omitempty"`
	Type     string   `json:"type,omitempty"`
	Sources  []string `json:"sources,omitempty"`
	Created  string   `json:"created,omitempty"`
	Updated  string   `json:"updated,omitempty"`
	ReviewBy string   `json:"review_by,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// HasSources is true when the header has a sources key (even empty).
	HasSources bool `json:"-"`
}

// Link is one wikilink as written in a page.
type Link struct {
	// Raw is the text between the brackets.
	Raw string `json:"raw"`
	// Target is the link path ("Folder/Page", "image.png"); empty for a
	// link to a heading of the same page ([[#Heading]]).
	Target string `json:"target"`
	// Heading is the heading (or ^block) part after '#', if any.
	Heading string `json:"heading,omitempty"`
	// Alias is the display text after '|', if any.
	Alias string `json:"alias,omitempty"`
	// Embed is true for ![[…]].
	Embed bool `json:"embed,omitempty"`
	// Line is the 1-based line of the link.
	Line int `json:"line"`
}

// Page is a parsed Markdown file of the vault.
type Page struct {
	// Path is the vault-relative path with forward slashes.
	Path string `json:"path"`
	// Title is the frontmatter title, else the file name without .md.
	Title       string      `json:"title"`
	Frontmatter Frontmatter `json:"frontmatter"`
	// FrontmatterError explains a header that is not valid YAML; the page is
	// still indexed as text.
	FrontmatterError string `json:"frontmatterError,omitempty"`
	// Body is the text after the frontmatter.
	Body     string    `json:"-"`
	Links    []Link    `json:"links,omitempty"`
	Headings []string  `json:"headings,omitempty"`
	Hash     string    `json:"hash"`
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"modTime"`
}

// Hash returns the hex SHA-256 of b: the identity of a file's content used
// for conflict checks, unchanged-source skips and the collision table.
func Hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ParsePage parses the content of the file at vault-relative path p. It
// never fails: a broken header is reported in FrontmatterError and the
// whole file is then treated as body text.
func ParsePage(p string, content []byte) *Page {
	pg := &Page{Path: p, Hash: Hash(content), Size: int64(len(content))}
	text := string(content)
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	header, body, ok := splitFrontmatter(text)
	pg.Body = body
	if ok {
		fm, err := parseFrontmatter(header)
		if err != nil {
			pg.FrontmatterError = err.Error()
		} else {
			pg.Frontmatter = fm
		}
	}
	pg.Title = strings.TrimSpace(pg.Frontmatter.Title)
	if pg.Title == "" {
		pg.Title = strings.TrimSuffix(path.Base(p), path.Ext(p))
	}
	pg.Links, pg.Headings = scanMarkdown(pg.Body, strings.Count(text[:len(text)-len(body)], "\n"))
	return pg
}

// splitFrontmatter separates a leading "---" YAML block from the body.
func splitFrontmatter(text string) (header, body string, ok bool) {
	t := strings.TrimPrefix(text, "\ufeff")
	if !strings.HasPrefix(t, "---\n") && !strings.HasPrefix(t, "---\r\n") {
		return "", text, false
	}
	rest := t[strings.IndexByte(t, '\n')+1:]
	off := 0
	for off <= len(rest) {
		end := strings.IndexByte(rest[off:], '\n')
		line := rest[off:]
		if end >= 0 {
			line = rest[off : off+end]
		}
		if l := strings.TrimRight(line, "\r \t"); l == "---" || l == "..." {
			if end < 0 {
				return rest[:off], "", true
			}
			return rest[:off], rest[off+end+1:], true
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return "", text, false // an unclosed "---" is a thematic break, not a header
}

func parseFrontmatter(header string) (Frontmatter, error) {
	var fm Frontmatter
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(header), &raw); err != nil {
		return fm, fmt.Errorf("frontmatter is not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var errs []string
	str := func(key string) string {
		v, ok := raw[key]
		if !ok || v == nil {
			return ""
		}
		switch x := v.(type) {
		case string:
			return x
		case time.Time:
			if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 {
				return x.Format("2006-01-02")
			}
			return x.Format(time.RFC3339)
		case int, float64, bool:
			return fmt.Sprint(x)
		}
		errs = append(errs, fmt.Sprintf("%s must be a string", key))
		return ""
	}
	list := func(key string) []string {
		v, ok := raw[key]
		if !ok || v == nil {
			return nil
		}
		switch x := v.(type) {
		case string:
			return []string{x}
		case []any:
			var out []string
			for _, e := range x {
				if s, ok := e.(string); ok {
					out = append(out, s)
				} else {
					errs = append(errs, fmt.Sprintf("%s must be a list of strings", key))
					return out
				}
			}
			return out
		}
		errs = append(errs, fmt.Sprintf("%s must be a list", key))
		return nil
	}
	fm.Title, fm.Type, fm.Created, fm.Updated, fm.ReviewBy = str("title"), str("type"), str("created"), str("updated"), str("review_by")
	fm.Sources, fm.Tags = list("sources"), list("tags")
	_, fm.HasSources = raw["sources"]
	if fm.ReviewBy != "" {
		if _, err := time.Parse("2006-01-02", fm.ReviewBy[:min(10, len(fm.ReviewBy))]); err != nil {
			errs = append(errs, fmt.Sprintf("review_by %q is not a date (YYYY-MM-DD)", fm.ReviewBy))
		}
	}
	if len(errs) > 0 {
		return fm, fmt.Errorf("frontmatter: %s", strings.Join(errs, "; "))
	}
	return fm, nil
}

// scanMarkdown returns the wikilinks and headings of body, skipping fenced
// code blocks, inline code spans and HTML comments, where Obsidian sees no
// links. firstLine is the number of lines before body in the file.
func scanMarkdown(body string, firstLine int) (links []Link, headings []string) {
	lines := strings.Split(body, "\n")
	var fence string
	inComment := false
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " \t>")
		if fence != "" {
			if strings.HasPrefix(strings.TrimSpace(trimmed), fence) && strings.Trim(strings.TrimSpace(trimmed), fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceMarker(trimmed); f != "" {
			fence = f
			continue
		}
		if strings.HasPrefix(line, "#") {
			if h, ok := headingText(line); ok {
				headings = append(headings, h)
			}
		}
		links, inComment = lineLinks(line, firstLine+i+1, links, inComment)
	}
	return links, headings
}

func fenceMarker(s string) string {
	for _, c := range []string{"```", "~~~"} {
		if strings.HasPrefix(s, c) {
			n := len(s) - len(strings.TrimLeft(s, c[:1]))
			return strings.Repeat(c[:1], n)
		}
	}
	return ""
}

func headingText(line string) (string, bool) {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || (len(line) > n && line[n] != ' ' && line[n] != '\t') {
		return "", false
	}
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[n:]), "#")), true
}

// lineLinks appends the wikilinks of one line outside code spans and
// comments.
func lineLinks(line string, lineNo int, links []Link, inComment bool) ([]Link, bool) {
	for i := 0; i < len(line); {
		if inComment {
			end := strings.Index(line[i:], "-->")
			if end < 0 {
				return links, true
			}
			i += end + 3
			inComment = false
			continue
		}
		switch {
		case strings.HasPrefix(line[i:], "<!--"):
			inComment = true
			i += 4
		case line[i] == '\\':
			i += 2
		case line[i] == '`':
			n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
			ticks := line[i : i+n]
			end := strings.Index(line[i+n:], ticks)
			if end < 0 {
				i += n // an unmatched run is literal backticks
				continue
			}
			i += n + end + n
		case strings.HasPrefix(line[i:], "[["):
			end := strings.Index(line[i+2:], "]]")
			if end < 0 {
				return links, false
			}
			inner := line[i+2 : i+2+end]
			if l, ok := parseLink(inner); ok {
				l.Embed = i > 0 && line[i-1] == '!'
				l.Line = lineNo
				links = append(links, l)
			}
			i += 2 + end + 2
		default:
			i++
		}
	}
	return links, inComment
}

// parseLink splits the text between [[ and ]].
func parseLink(inner string) (Link, bool) {
	if strings.TrimSpace(inner) == "" || strings.Contains(inner, "[[") {
		return Link{}, false
	}
	l := Link{Raw: inner}
	target := inner
	if i := strings.IndexByte(inner, '|'); i >= 0 {
		target, l.Alias = inner[:i], inner[i+1:]
		// In a table the pipe is escaped: [[Page\|alias]].
		target = strings.TrimSuffix(target, `\`)
	}
	if i := strings.IndexByte(target, '#'); i >= 0 {
		target, l.Heading = target[:i], strings.TrimSpace(target[i+1:])
	}
	l.Target = strings.TrimSpace(target)
	return l, true
}

// MarshalPage renders frontmatter and body as a page file. Keys are written
// in a fixed order so that rewrites are stable.
func MarshalPage(fm Frontmatter, body string) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	kv := func(k string, v any) {
		out, _ := yaml.Marshal(map[string]any{k: v})
		b.Write(out)
	}
	kv("title", fm.Title)
	if fm.Type != "" {
		kv("type", fm.Type)
	}
	kv("sources", nonNil(fm.Sources))
	if fm.Created != "" {
		kv("created", fm.Created)
	}
	if fm.Updated != "" {
		kv("updated", fm.Updated)
	}
	if fm.ReviewBy != "" {
		kv("review_by", fm.ReviewBy)
	}
	if len(fm.Tags) > 0 {
		kv("tags", fm.Tags)
	}
	b.WriteString("---\n")
	b.WriteString(strings.TrimLeft(body, "\n"))
	if !strings.HasSuffix(body, "\n") {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
