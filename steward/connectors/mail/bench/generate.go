// Package bench measures the mail connector at the reference archive's
// scale: it generates a synthetic Maildir (78,000 messages in about 45,000
// threads, 46 % partial or missing bodies, about 13,900 attachments),
// backfills it beside `notmuch new`, embeds it with 1,024-dimension vectors
// and times each retrieval case in a fresh process, next to the same SQL run
// through C SQLite and to sqlite-vec's exact KNN.
package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
)

// GenOptions size the synthetic archive.
type GenOptions struct {
	Dir         string // the Maildir root is Dir/Maildir
	Messages    int    // active messages (default 78,000)
	Threads     int    // default Messages × 45/78
	Attachments int    // default Messages × 13.9/78
	// PartialShare and NoneShare are the shares of messages whose body the
	// benchmark marks partial and none after backfill (default 0.36, 0.10).
	PartialShare, NoneShare float64
	// AllMailShare of messages get a second copy in [Gmail]/All Mail.
	AllMailShare float64
	Seed         int64
	Progress     func(done, total int)
}

func (o *GenOptions) defaults() {
	if o.Messages <= 0 {
		o.Messages = 78000
	}
	if o.Threads <= 0 {
		o.Threads = o.Messages * 45 / 78
	}
	if o.Attachments <= 0 {
		o.Attachments = o.Messages * 139 / 780
	}
	if o.PartialShare == 0 && o.NoneShare == 0 {
		o.PartialShare, o.NoneShare = 0.36, 0.10
	}
	if o.AllMailShare == 0 {
		o.AllMailShare = 0.05
	}
	if o.Seed == 0 {
		o.Seed = 20261014
	}
}

// Manifest describes what was generated.
type Manifest struct {
	Root        string   `json:"-"`
	Messages    int      `json:"messages"`
	Files       int      `json:"files"`
	Threads     int      `json:"threads"`
	Attachments int      `json:"attachments"`
	Partial     []string `json:"-"` // Message-IDs to mark partial
	None        []string `json:"-"`
	Bytes       int64    `json:"bytes"`
	// SubjectWord occurs in a few hundred subjects; BodyWord in thousands of bodies.
	SubjectWord string `json:"subjectWord"`
	BodyWord    string `json:"bodyWord"`
}

// Absent is a string no generated message contains.
const Absent = "stewardbenchmarkabsent9e7318fd"

// topics are the subjects' themes; each has its own words, which also drive
// the synthetic embeddings.
var topics = []string{"project", "invoice", "meeting", "travel", "contract", "solar", "budget", "school", "health", "insurance",
	"conference", "recruiting", "release", "support", "shipping", "apartment", "tax", "research", "garden", "concert"}

// vocab returns n pseudo-words plus the topic words; word i is drawn with
// Zipf-like frequency.
func vocab(rng *rand.Rand, n int) []string {
	syll := []string{"ka", "lo", "ri", "ve", "to", "na", "mi", "sa", "de", "po", "lu", "ter", "con", "gra", "fin", "sta", "pro", "mer", "bal", "zi"}
	seen := map[string]bool{}
	out := append([]string{}, strings.Fields("the and for with this that from your will have about please thanks regards attached meeting review update next week")...)
	for len(out) < n {
		k := 2 + rng.Intn(3)
		var b strings.Builder
		for i := 0; i < k; i++ {
			b.WriteString(syll[rng.Intn(len(syll))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

type zipf struct {
	cum []float64
	rng *rand.Rand
}

func newZipf(rng *rand.Rand, n int, s float64) *zipf {
	z := &zipf{cum: make([]float64, n), rng: rng}
	total := 0.0
	for i := 0; i < n; i++ {
		total += 1 / math.Pow(float64(i+1), s)
		z.cum[i] = total
	}
	for i := range z.cum {
		z.cum[i] /= total
	}
	return z
}

func (z *zipf) next() int {
	x := z.rng.Float64()
	lo, hi := 0, len(z.cum)-1
	for lo < hi {
		m := (lo + hi) / 2
		if z.cum[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Generate writes the synthetic Maildir.
func Generate(ctx context.Context, o GenOptions) (*Manifest, error) {
	o.defaults()
	rng := rand.New(rand.NewSource(o.Seed))
	words := vocab(rng, 6000)
	zw := newZipf(rng, len(words), 1.05)
	md := &archive.Maildir{Root: filepath.Join(o.Dir, "Maildir")}
	man := &Manifest{Root: md.Root, Messages: o.Messages, Threads: o.Threads, SubjectWord: "quarterly", BodyWord: "project"}
	people := make([]string, 3000)
	for i := range people {
		people[i] = fmt.Sprintf("%s %s <%s.%s%d@%s.example>", title(words[100+i%2000]), title(words[2100+i%1900]),
			words[100+i%2000], words[2100+i%1900], i, words[4000+i%300])
	}
	const me = "Me Myself <me@example.com>"

	// Thread sizes: geometric, then adjusted so the total is exact.
	sizes := make([]int, o.Threads)
	total := 0
	p := float64(o.Threads) / float64(o.Messages)
	for i := range sizes {
		n := 1
		for rng.Float64() > p && n < 40 {
			n++
		}
		sizes[i] = n
		total += n
	}
	for total != o.Messages {
		i := rng.Intn(len(sizes))
		if total > o.Messages && sizes[i] > 1 {
			sizes[i]--
			total--
		} else if total < o.Messages {
			sizes[i]++
			total++
		}
	}
	// Which messages carry attachments, partial or missing bodies.
	attachEvery := float64(o.Attachments) / float64(o.Messages)
	shared := make([][]byte, 20) // logos and signatures shared by many messages
	for i := range shared {
		shared[i] = randomBytes(rng, 2000+rng.Intn(6000))
	}
	end := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	span := 6 * 365 * 24 * time.Hour
	done, attachments := 0, 0
	for t, size := range sizes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		topic := topics[rng.Intn(len(topics))]
		subject := fmt.Sprintf("%s %s %s", title(topic), words[zw.next()%3000], words[rng.Intn(len(words))])
		if rng.Float64() < 0.0053 { // about 240 threads, 415 messages at full scale

			subject = "Quarterly " + subject
		}
		other := people[rng.Intn(len(people))]
		cc := []string{}
		if rng.Float64() < 0.3 {
			cc = append(cc, people[rng.Intn(len(people))])
		}
		start := end.Add(-time.Duration(rng.Int63n(int64(span))))
		gm := ""
		if rng.Float64() < 0.3 {
			gm = fmt.Sprint(1_600_000_000_000_000_000 + int64(t))
		}
		var refs []string
		for k := 0; k < size; k++ {
			id := fmt.Sprintf("m%d.%d@bench.example", t, k)
			from, to := other, []string{me}
			box := "INBOX"
			flags := "S"
			if k%2 == 1 {
				from, to, box = me, []string{other}, "Sent"
			}
			switch r := rng.Float64(); {
			case box == "INBOX" && r < 0.08:
				flags = "" // unread, in new/
			case r < 0.11:
				flags = "FS"
			case box == "INBOX" && r < 0.25:
				box = "Archive"
			case box == "INBOX" && r < 0.32:
				box = "Newsletters"
			}
			m := archive.Message{ID: id, From: from, To: to, Cc: cc, Date: start.Add(time.Duration(k*(1+rng.Intn(48))) * time.Hour), GmThread: gm}
			m.Subject = subject
			if k > 0 {
				m.Subject = "Re: " + subject
				if rng.Float64() < 0.9 { // the rest rely on the subject rule
					m.InReplyTo = refs[len(refs)-1]
					m.References = append([]string(nil), refs...)
				}
			}
			refs = append(refs, id)
			state := rng.Float64()
			switch {
			case state < o.NoneShare:
				man.None = append(man.None, id)
			case state < o.NoneShare+o.PartialShare:
				man.Partial = append(man.Partial, id)
				m.Body = sentence(rng, words, zw, topic, 8+rng.Intn(20))
			default:
				m.Body = paragraphs(rng, words, zw, topic, 300+rng.Intn(2700))
			}
			for rng.Float64() < attachEvery*0.92 && len(m.Attach) < 3 && attachments < o.Attachments {
				data := shared[rng.Intn(len(shared))]
				if rng.Float64() < 0.8 {
					data = randomBytes(rng, 1000+rng.Intn(30000))
				}
				m.Attach = append(m.Attach, archive.Attachment{Name: fmt.Sprintf("%s-%d.pdf", topic, attachments), ContentType: "application/pdf", Data: data})
				attachments++
				if rng.Float64() < 0.25 {
					break
				}
			}
			if _, err := md.Add(box, m, flags); err != nil {
				return nil, err
			}
			man.Files++
			if rng.Float64() < o.AllMailShare {
				if _, err := md.Add("[Gmail]/All Mail", m, "S"); err != nil {
					return nil, err
				}
				man.Files++
			}
			done++
			if o.Progress != nil && done%1000 == 0 {
				o.Progress(done, o.Messages)
			}
		}
	}
	man.Attachments = attachments
	return man, nil
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

func sentence(rng *rand.Rand, words []string, z *zipf, topic string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		if rng.Float64() < 0.04 {
			b.WriteString(topic)
		} else {
			b.WriteString(words[z.next()])
		}
	}
	b.WriteByte('.')
	return b.String()
}

func paragraphs(rng *rand.Rand, words []string, z *zipf, topic string, chars int) string {
	var b strings.Builder
	for b.Len() < chars {
		b.WriteString(sentence(rng, words, z, topic, 6+rng.Intn(14)))
		if rng.Float64() < 0.2 {
			b.WriteString("\n\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}
