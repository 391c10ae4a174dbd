package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/steward/connectors/contacts"
)

// contactsConnector finds contacts.yaml (CONTACTS_CONFIG) and the index
// (CONTACTS_INDEX_DB).
var contactsConnector = pimConnector[contacts.Config]{
	name: "contacts", configVar: "CONTACTS_CONFIG", indexVar: "CONTACTS_INDEX_DB",
	load: contacts.LoadConfig, embedSetting: func(c *contacts.Config) string { return c.Embed },
}

func init() {
	contactsConnector.register(pimCommands[contacts.Config]{
		summary: "index contacts from Apple AddressBook or vCard sources",
		job: pimJob[contacts.Config]{
			verb: "index",
			description: "Reads the sources in contacts.yaml (CONTACTS_CONFIG; on macOS the AddressBook folder when the file is absent),\n" +
				"merges people who share a primary email under one sidecar uid, and publishes the contacts index\n" +
				"(CONTACTS_INDEX_DB) in one transaction, then embeds changed people through local-embed unless embeddings are\n" +
				"off. A source that cannot be read keeps its indexed records and makes the command fail with the reason.",
			jsonHelp: "print the report as JSON",
			build: func(ctx context.Context, c *contacts.Config, indexPath string, emb vecindex.Embedder, log *slog.Logger) (*pimOutcome, error) {
				rep, err := indexContacts(ctx, c, indexPath, contacts.IndexOptions{Embedder: emb, Log: log})
				if err != nil {
					return nil, err
				}
				return &pimOutcome{report: rep, itemErrors: rep.RecordErrors, embedError: rep.EmbedError, sourceErrors: rep.SourceErrors,
					summary: fmt.Sprintf("contacts index %d: %d records → %d people (%d merged by email); %d added, %d updated, %d unchanged, %d deleted; %d embedded",
						rep.Generation, rep.Records, rep.People, rep.Merged, rep.Added, rep.Updated, rep.Unchanged, rep.Deleted, rep.Embedded)}, nil
			},
		},
		mcp:          contactsMCP,
		benchSummary: "contacts FTS5 and vector KNN at the spec's scale (771 contacts) and 10×, against C SQLite",
		bench:        contactsBench,
	})
}

// indexContacts reads the sources of c into the index at indexPath.
func indexContacts(ctx context.Context, c *contacts.Config, indexPath string, opts contacts.IndexOptions) (*contacts.Report, error) {
	idx, err := contacts.OpenIndex(ctx, indexPath)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	return idx.Build(ctx, c, opts)
}

func contactsMCP(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
	indexPath, emb, err := contactsConnector.queryEmbedder(env)
	if err != nil {
		return nil, err
	}
	open, _ := contacts.OpenService(indexPath, emb)
	open = unbuiltBecauseUnconfigured(open, contacts.ErrNoIndex, func() error { return contactsConnector.unconfigured(env) })
	return contacts.NewWritableMCPServer(open, contactsWriter(env, indexPath), version), nil
}

// contactsBench reproduces the spec's Contacts rows.
var contactsBench = pimBenchSuite{
	name: "contacts", records: 771, noun: "people",
	description: "Builds synthetic contacts indexes (771 people × each scale, the spec's measured size, with 1,024-dimension\n" +
		"vectors) through the real indexer, then times the spec's Contacts rows: FTS5 for \"università\" and for the\n" +
		"absent \"university\" (cap 200) and vector KNN (cap 200), one first query plus warm samples, on a read-only\n" +
		"connection. The same SQL runs through C SQLite of the same release as a baseline when steward is built with\n" +
		"-tags 'csqlite fts5' (cgo). Writes a JSON report.",
	write: func(dir string, n int) (string, error) {
		path := filepath.Join(dir, "bench.vcf")
		return path, os.WriteFile(path, benchContactsVCF(n), 0o600)
	},
	index: func(ctx context.Context, path, indexPath string, n int, emb vecindex.Embedder) error {
		rep, err := indexContacts(ctx, &contacts.Config{Sources: []contacts.SourceConfig{{Name: "bench", Kind: contacts.KindVCard, Path: path}}},
			indexPath, contacts.IndexOptions{Embedder: emb})
		if err == nil && (rep.People != n || rep.Embedded != n) {
			err = fmt.Errorf("%d people, %d embedded, want %d (%s)", rep.People, rep.Embedded, n, rep.EmbedError)
		}
		return err
	},
	cases: func(query []byte) []pimSQLCase {
		fts := `SELECT rowid FROM people_fts WHERE people_fts MATCH '%s' ORDER BY bm25(people_fts, 10.0, 8.0, 5.0, 4.0, 1.0, 3.0, 1.0) LIMIT 200`
		return []pimSQLCase{
			{Name: "Contacts FTS5 matching query, cap 200", Spec: "10 / 5.07 ms / 0.027 ms / 0.035 ms", SQL: fmt.Sprintf(fts, `"universita"`)},
			{Name: "Contacts FTS5 absent query, cap 200", Spec: "0 / 2.45 ms / 0.017 ms / 0.023 ms", SQL: fmt.Sprintf(fts, `"university"`)},
			{Name: "Contacts vector KNN, cap 200", Spec: "200 / 11.24 ms / 0.67 ms / 0.69 ms",
				SQL: `SELECT rowid, distance FROM people_vec WHERE embedding MATCH ? AND k = 200 ORDER BY distance`, Args: []any{query}},
		}
	},
}

// benchContactsVCF generates n distinct people; about one in seventy-five
// works at an "Università" (the spec's query returns 10 of 771).
func benchContactsVCF(n int) []byte {
	r := rand.New(rand.NewPCG(771, 2026))
	first := strings.Fields("Marco Anna Giulia Luca Chiara Paolo Sara Francesco Elena Davide Matteo Laura Alessandro Martina Giorgio Federica")
	last := strings.Fields("Rossi Bianchi Verdi Neri Galli Conti Ricci Marino Greco Bruno Costa Fontana Rinaldi Caruso Ferri Moretti")
	orgs := []string{"ACME S.p.A.", "Studio Legale Conti", "Fastweb", "Politecnico di Milano", "Comune di Torino", "Ospedale San Raffaele",
		"Banca Intesa", "Trenitalia", "Ferrari", "Barilla", "Autogrill", "Eni"}
	titles := []string{"Engineer", "Accountant", "Lawyer", "Doctor", "Researcher", "Manager", "Designer", "Teacher", "Sales", ""}
	var b strings.Builder
	for i := range n {
		fn, ln := first[r.IntN(len(first))], last[r.IntN(len(last))]
		org := orgs[r.IntN(len(orgs))]
		if r.IntN(75) == 0 {
			org = "Università di " + []string{"Bologna", "Padova", "Pisa"}[r.IntN(3)]
		}
		fmt.Fprintf(&b, "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:bench-%d\r\nFN:%s %s\r\nN:%s;%s;;;\r\nORG:%s\r\nTITLE:%s\r\n", i, fn, ln, ln, fn, org, titles[r.IntN(len(titles))])
		fmt.Fprintf(&b, "EMAIL;TYPE=INTERNET,pref:%s.%s.%d@example.com\r\n", strings.ToLower(fn), strings.ToLower(ln), i)
		fmt.Fprintf(&b, "TEL;TYPE=CELL:+39 3%02d %03d %04d\r\n", r.IntN(100), r.IntN(1000), r.IntN(10000))
		if r.IntN(3) == 0 {
			fmt.Fprintf(&b, "NOTE:met at %s\\, follow up about %s\r\n", orgs[r.IntN(len(orgs))], titles[r.IntN(len(titles))])
		}
		b.WriteString("END:VCARD\r\n")
	}
	return []byte(b.String())
}
