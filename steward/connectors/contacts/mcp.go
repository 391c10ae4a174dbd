package contacts

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool"
)

const serverInstructions = `Access to the user's contacts, from Steward's local index of Apple Contacts and vCard sources, with the same person merged across accounts by email.
Use search_contacts for general lookups and resolve_recipient before proposing an email: it ranks email-bearing candidates and never picks one for you.
When the result is ambiguous, ask the user which person or address is meant.
A contact's uid is Steward's sidecar id; the native person ids of the contributing sources are in read_contact's sources.`

// NewMCPServer returns the contacts connector's MCP server with the tools
// search_contacts, read_contact and resolve_recipient,
// plus the private steward/prepareSearch request.
//
// open is called by each tool call until it succeeds, so a connector started
// before the first sync serves as soon as the index exists.
func NewMCPServer(open func(context.Context) (*Service, error), version string) *mcp.Server {
	return newMCPServer(open, nil, version)
}

// NewWritableMCPServer adds create_contact and update_contact, gated by the
// host with a preflight that resolves the address book or the record.
func NewWritableMCPServer(open func(context.Context) (*Service, error), write func(context.Context) (*Writer, error), version string) *mcp.Server {
	return newMCPServer(open, write, version)
}

const writeInstructions = `create_contact and update_contact change the user's contacts after the user approves the exact change.
update_contact names a contact by its uid; when read_contact lists several sources, pass the nativeId of the one to change.
Every write is journaled and confirmed by a later indexing run; never repeat a write whose result is uncertain.`

func newMCPServer(open func(context.Context) (*Service, error), write func(context.Context) (*Writer, error), version string) *mcp.Server {
	instructions := serverInstructions
	if write != nil {
		instructions += "\n" + writeInstructions
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-contacts", Title: "Steward contacts", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	mcp.AddTool(s, &mcp.Tool{
		Name: "search_contacts",
		Description: "Find contacts by name, organization, role, email, phone or any remembered detail (keyword and meaning). " +
			"Returns compact entries with labelled emails and phones; limit defaults to 10 (max 50), use nextOffset for more.",
		Annotations: ro,
	}, mcptool.Handler(open, func(svc *Service, ctx context.Context, p SearchParams) (*SearchResult, error) {
		r, err := svc.SearchContacts(ctx, p)
		if r != nil {
			r.Kind = "search_results"
			for i := range r.Contacts {
				r.Contacts[i].Kind = "contact"
			}
		}
		return r, err
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "read_contact",
		Description: "Read one contact in full (all emails, phones, addresses, notes and the sources it was merged from) by uid, native person id or email.",
		Annotations: ro,
	}, mcptool.Handler(open, (*Service).ReadContact))
	mcp.AddTool(s, &mcp.Tool{
		Name: "resolve_recipient",
		Description: "Turn a description such as 'Anna from Polimi' or 'my accountant' into ranked email-bearing candidates, " +
			"each with the reasons it matched. It never chooses: when ambiguous is true, ask the user before proposing a message.",
		Annotations: ro,
	}, mcptool.Handler(open, (*Service).ResolveRecipient))
	// The method name is a constant, so registration cannot fail.
	_ = mcptool.AddPrepareSearch(s, open, ErrNoIndex, (*Service).Prepare)
	if write != nil {
		w := &mcp.ToolAnnotations{DestructiveHint: new(bool), OpenWorldHint: new(bool)}
		mcptool.AddGated(s, &mcp.Tool{
			Name: "create_contact",
			Description: "Create a contact (needs the user's approval): names, organization, title, emails, phones, addresses, " +
				"birthday, notes. addressBook may be left out when there is only one.",
			Annotations: w,
		}, write, (*Writer).PreflightCreate, (*Writer).CreateContact)
		mcptool.AddGated(s, &mcp.Tool{
			Name: "update_contact",
			Description: "Change a contact (needs the user's approval): only the fields given change; emails, phones and addresses " +
				"replace the whole list. Name it by uid (and nativeId when it merges several sources).",
			Annotations: w,
		}, write, (*Writer).PreflightUpdate, (*Writer).UpdateContact)
	}
	return s
}

// Prepare warms the index for the host's start-up preparation: a keyword
// lookup and one vector KNN, without returning content.
func (svc *Service) Prepare(ctx context.Context) (mcptool.PrepareResult, error) {
	return mcptool.WarmIndex(ctx, svc.idx.db, "people_fts", "people_vec")
}

// OpenService returns an opener for NewMCPServer that opens the index at
// path read-only on first use and keeps it; until the first indexing run
// every call reports ErrNoIndex. close releases it.
func OpenService(path string, emb Embedder) (open func(context.Context) (*Service, error), close func() error) {
	return mcptool.OnIndex(func(ctx context.Context) (*Index, error) { return OpenIndexReadOnly(ctx, path) },
		func(_ context.Context, idx *Index) *Service { return NewService(idx, emb) },
		func(svc *Service) error { return svc.idx.Close() })
}
