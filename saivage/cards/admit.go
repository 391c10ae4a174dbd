package cards

import (
	"context"
	"errors"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/records"
)

// Node is one card of an admitted graph.
type Node struct {
	Card     Card
	Head     Head
	Children []*Node
}

// Graph is the strictly admitted current card tree.
type Graph struct {
	Root *Node
	// Cards indexes every reached card, tombstones included.
	Cards map[string]*Node
	// Active counts reached ordinary cards; Tombstones reached tombstones.
	Active, Tombstones int
	// RecordVersions is the sum of the latest accepted versions of every
	// record of every active card.
	RecordVersions int
}

// Admit strictly validates the current graph: every reached head and
// selected document, identity-derived parent/depth, membership and
// compiled child-type permission, sibling dependencies (active, acyclic),
// each active card's declared record heads and selected accepted versions,
// and each configured card session index. Traversal stops at tombstones.
// The first problem is returned naming the exact file; nothing is repaired.
func (s *Store) Admit(ctx context.Context) (*Graph, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &Graph{Cards: map[string]*Node{}}
	h, root, err := s.read(RootID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, admErr(s.headPath(RootID), "root card head is missing")
		}
		return nil, err
	}
	if root.Type != config.RootCardType || root.Tombstoned() {
		return nil, admErr(s.docPath(RootID, h.Document), "root must be an ordinary card of type project")
	}
	g.Root = &Node{Card: root, Head: h}
	queue := []*Node{g.Root}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := queue[0]
		queue = queue[1:]
		g.Cards[n.Card.ID] = n
		if n.Card.Tombstoned() {
			g.Tombstones++
			continue
		}
		g.Active++
		if err := s.admitCard(n, g); err != nil {
			return nil, err
		}
		docPath := s.docPath(n.Card.ID, n.Head.Document)
		tbl, _ := s.wf.Table(n.Card.Type)
		if len(n.Card.Children) > 0 && n.Card.Depth >= MaxDepth {
			return nil, admErr(docPath, "card at depth %d has children", n.Card.Depth)
		}
		seen := map[string]bool{}
		for _, kid := range n.Card.Children {
			if seen[kid] || ParentOf(kid) != n.Card.ID || !ValidID(kid) {
				return nil, admErr(docPath, "child %q is duplicated or not derived from %s", kid, n.Card.ID)
			}
			seen[kid] = true
			kh, kc, err := s.read(kid)
			if err != nil {
				if errors.Is(err, ErrNotFound) {
					return nil, admErr(s.headPath(kid), "listed child has no head")
				}
				return nil, err
			}
			if !tbl.PermitsChild(kc.Type) {
				return nil, admErr(s.docPath(kid, kh.Document), "type %s is not a permitted child of %s", kc.Type, n.Card.Type)
			}
			kn := &Node{Card: kc, Head: kh}
			n.Children = append(n.Children, kn)
			queue = append(queue, kn)
		}
		// Dependencies of the now-known children.
		graph := map[string][]string{}
		for _, kn := range n.Children {
			if kn.Card.Tombstoned() {
				continue
			}
			graph[kn.Card.ID] = kn.Card.Dependencies
		}
		for _, kn := range n.Children {
			for _, d := range kn.Card.Dependencies {
				if _, ok := graph[d]; !ok || d == kn.Card.ID {
					if kn.Card.Tombstoned() {
						continue
					}
					return nil, admErr(s.docPath(kn.Card.ID, kn.Head.Document), "dependency %q is not an active sibling", d)
				}
			}
		}
		if findCycle(graph) {
			return nil, admErr(docPath, "children's dependencies form a cycle")
		}
	}
	return g, nil
}

func (s *Store) admitCard(n *Node, g *Graph) error {
	tbl, _ := s.wf.Table(n.Card.Type)
	for _, r := range tbl.Records() {
		ref := records.Ref{CardDir: s.CardDir(n.Card.ID), Card: n.Card.ID, Name: r.Name}
		h, err := s.records.ReadHead(ref)
		if err != nil {
			if errors.Is(err, records.ErrNotInitialized) {
				return admErr(ref.HeadPath(), "declared record %s has no head", r.Name)
			}
			return err
		}
		if h.Latest > 0 {
			if _, err := s.records.Latest(ref, h); err != nil {
				return err
			}
		}
		g.RecordVersions += h.Latest
	}
	for _, agent := range tbl.SessionAgents() {
		if _, err := s.sessions.ReadIndex(s.SessionDir(n.Card.ID, agent), conversations.SessionID(agent, n.Card.ID)); err != nil {
			return err
		}
	}
	return nil
}

// Walk visits the active graph depth-first in child order.
func (g *Graph) Walk(fn func(n *Node, depth int)) {
	var visit func(*Node, int)
	visit = func(n *Node, d int) {
		fn(n, d)
		for _, k := range n.Children {
			visit(k, d+1)
		}
	}
	visit(g.Root, 0)
}

// Summary counts admitted cards by status (tombstones excluded).
func (g *Graph) Summary() map[Status]int {
	out := map[Status]int{}
	for _, n := range g.Cards {
		if !n.Card.Tombstoned() {
			out[n.Card.Status]++
		}
	}
	return out
}

// Ordered returns every reached card in depth-first child order.
func (g *Graph) Ordered() []*Node {
	var out []*Node
	g.Walk(func(n *Node, _ int) { out = append(out, n) })
	return out
}
