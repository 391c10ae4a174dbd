package wiki

import (
	"math"
	"sort"
)

// Relevance weights of the four signals between two pages.
const (
	WeightDirectLink    = 3.0
	WeightSourceOverlap = 4.0
	WeightAdamicAdar    = 1.5
	WeightTypeAffinity  = 1.0
)

// GraphNode is one page of the graph.
type GraphNode struct {
	Path      string `json:"path"`
	Title     string `json:"title"`
	Type      string `json:"type,omitempty"`
	Degree    int    `json:"degree"`
	Community int    `json:"community"`
}

// GraphEdge is an undirected link between two pages (by node index).
type GraphEdge struct {
	From   int     `json:"from"`
	To     int     `json:"to"`
	Weight float64 `json:"weight"`
}

// Community is one Louvain community.
type Community struct {
	ID   int `json:"id"`
	Size int `json:"size"`
	// Cohesion is the share of possible links inside the community that
	// exist (1 for a clique; 0 for pages held together by nothing).
	Cohesion float64  `json:"cohesion"`
	Top      []string `json:"top"` // its most linked pages
}

// Insights are what the graph says about the wiki's shape.
type Insights struct {
	Isolated []string `json:"isolated"`          // pages with no link and no shared source
	Sparse   []int    `json:"sparseCommunities"` // communities of 3+ pages with cohesion < 0.15
	Bridges  []string `json:"bridges"`           // pages linking 3+ communities
}

// Graph is the page graph from wikilinks and shared sources.
type Graph struct {
	Nodes       []GraphNode `json:"nodes"`
	Edges       []GraphEdge `json:"edges"`
	Communities []Community `json:"communities"`
	Modularity  float64     `json:"modularity"`
	Insights    Insights    `json:"insights"`

	index   map[string]int
	links   []map[int]bool // direct wikilink neighbours
	sources [][]string
	bySrc   map[string][]int
}

// BuildGraph builds the graph of the vault's pages.
func BuildGraph(v *Vault) *Graph {
	pages := v.Pages()
	g := &Graph{Nodes: make([]GraphNode, len(pages)), index: make(map[string]int, len(pages)),
		links: make([]map[int]bool, len(pages)), sources: make([][]string, len(pages)), bySrc: map[string][]int{}}
	for i, p := range pages {
		g.index[p.Path] = i
		g.Nodes[i] = GraphNode{Path: p.Path, Title: p.Title, Type: p.Frontmatter.Type}
		g.links[i] = map[int]bool{}
	}
	v.mu.RLock()
	for i, p := range pages {
		for _, l := range p.Links {
			to := v.resolver.Resolve(l.Target, p.Path)
			j, ok := g.index[to]
			if !ok || j == i {
				continue
			}
			g.links[i][j], g.links[j][i] = true, true
		}
		seen := map[string]bool{}
		for _, s := range p.Frontmatter.Sources {
			if !seen[s] {
				seen[s] = true
				g.sources[i] = append(g.sources[i], s)
				g.bySrc[s] = append(g.bySrc[s], i)
			}
		}
	}
	v.mu.RUnlock()
	// Louvain runs on links plus shared sources, weighted as in relevance.
	adj := make([]map[int]float64, len(pages))
	for i := range adj {
		adj[i] = map[int]float64{}
		for j := range g.links[i] {
			adj[i][j] += WeightDirectLink
		}
	}
	for _, members := range g.bySrc {
		if len(members) > 200 {
			continue // a source behind hundreds of pages says little about any pair
		}
		for a := 0; a < len(members); a++ {
			for b := a + 1; b < len(members); b++ {
				adj[members[a]][members[b]] += WeightSourceOverlap
				adj[members[b]][members[a]] += WeightSourceOverlap
			}
		}
	}
	for i := range adj {
		g.Nodes[i].Degree = len(g.links[i])
		for j, w := range adj[i] {
			if i < j {
				g.Edges = append(g.Edges, GraphEdge{From: i, To: j, Weight: w})
			}
		}
	}
	sort.Slice(g.Edges, func(a, b int) bool {
		if g.Edges[a].From != g.Edges[b].From {
			return g.Edges[a].From < g.Edges[b].From
		}
		return g.Edges[a].To < g.Edges[b].To
	})
	comm, q := louvain(adj)
	g.Modularity = q
	g.summarise(comm, adj)
	return g
}

func (g *Graph) summarise(comm []int, adj []map[int]float64) {
	members := map[int][]int{}
	for i, c := range comm {
		g.Nodes[i].Community = c
		members[c] = append(members[c], i)
	}
	for c, ms := range members {
		internal := 0
		for _, i := range ms {
			for j := range adj[i] {
				if comm[j] == c && i < j {
					internal++
				}
			}
		}
		coh := 1.0
		if n := len(ms); n > 1 {
			coh = float64(internal) / float64(n*(n-1)/2)
		}
		sort.Slice(ms, func(a, b int) bool {
			if g.Nodes[ms[a]].Degree != g.Nodes[ms[b]].Degree {
				return g.Nodes[ms[a]].Degree > g.Nodes[ms[b]].Degree
			}
			return g.Nodes[ms[a]].Path < g.Nodes[ms[b]].Path
		})
		var top []string
		for _, i := range ms[:min(3, len(ms))] {
			top = append(top, g.Nodes[i].Path)
		}
		g.Communities = append(g.Communities, Community{ID: c, Size: len(ms), Cohesion: math.Round(coh*1000) / 1000, Top: top})
		if len(ms) >= 3 && coh < 0.15 {
			g.Insights.Sparse = append(g.Insights.Sparse, c)
		}
	}
	sort.Slice(g.Communities, func(a, b int) bool {
		if g.Communities[a].Size != g.Communities[b].Size {
			return g.Communities[a].Size > g.Communities[b].Size
		}
		return g.Communities[a].ID < g.Communities[b].ID
	})
	sort.Ints(g.Insights.Sparse)
	for i, n := range g.Nodes {
		if len(adj[i]) == 0 {
			g.Insights.Isolated = append(g.Insights.Isolated, n.Path)
		}
		others := map[int]bool{}
		for j := range g.links[i] {
			if comm[j] != comm[i] {
				others[comm[j]] = true
			}
		}
		if len(others) >= 2 { // its own community plus two others
			g.Insights.Bridges = append(g.Insights.Bridges, n.Path)
		}
	}
}

// typeAffinity is 1 for pages of the same declared type, 0.5 for pairs
// that usually belong together (a person and an organization, a decision
// and a commitment, a source and anything), else 0.
func typeAffinity(a, b string) float64 {
	if a == "" || b == "" {
		return 0
	}
	if a == b {
		return 1
	}
	pair := map[[2]string]bool{{"person", "organization"}: true, {"decision", "commitment"}: true,
		{"entity", "concept"}: true, {"person", "commitment"}: true, {"organization", "entity"}: true}
	if pair[[2]string{a, b}] || pair[[2]string{b, a}] || a == "source" || b == "source" {
		return 0.5
	}
	return 0
}

// Neighbor is a page related to another, with the relevance signals.
type Neighbor struct {
	Path          string  `json:"path"`
	Title         string  `json:"title"`
	Relevance     float64 `json:"relevance"`
	DirectLink    bool    `json:"directLink,omitempty"`
	SharedSources int     `json:"sharedSources,omitempty"`
	AdamicAdar    float64 `json:"adamicAdar,omitempty"`
	TypeAffinity  float64 `json:"typeAffinity,omitempty"`
}

// Relevance returns the 4-signal relevance of pages a and b.
func (g *Graph) Relevance(a, b string) Neighbor {
	i, ok1 := g.index[a]
	j, ok2 := g.index[b]
	if !ok1 || !ok2 {
		return Neighbor{Path: b}
	}
	return g.relevance(i, j)
}

func (g *Graph) relevance(i, j int) Neighbor {
	n := Neighbor{Path: g.Nodes[j].Path, Title: g.Nodes[j].Title}
	n.DirectLink = g.links[i][j]
	for _, s := range g.sources[i] {
		for _, t := range g.sources[j] {
			if s == t {
				n.SharedSources++
			}
		}
	}
	small, large := g.links[i], g.links[j]
	if len(small) > len(large) {
		small, large = large, small
	}
	for z := range small {
		if large[z] && len(g.links[z]) > 1 {
			n.AdamicAdar += 1 / math.Log(float64(len(g.links[z])))
		}
	}
	n.TypeAffinity = typeAffinity(g.Nodes[i].Type, g.Nodes[j].Type)
	if n.DirectLink {
		n.Relevance += WeightDirectLink
	}
	n.Relevance += WeightSourceOverlap*float64(n.SharedSources) + WeightAdamicAdar*n.AdamicAdar + WeightTypeAffinity*n.TypeAffinity
	n.AdamicAdar = math.Round(n.AdamicAdar*1000) / 1000
	n.Relevance = math.Round(n.Relevance*1000) / 1000
	return n
}

// Neighbors returns the pages most relevant to p: its links, pages
// sharing a source and pages two links away, best first.
func (g *Graph) Neighbors(p string, limit int) []Neighbor {
	i, ok := g.index[p]
	if !ok {
		return nil
	}
	cand := map[int]bool{}
	for j := range g.links[i] {
		cand[j] = true
		for k := range g.links[j] {
			cand[k] = true
		}
	}
	for _, s := range g.sources[i] {
		if len(g.bySrc[s]) <= 200 {
			for _, j := range g.bySrc[s] {
				cand[j] = true
			}
		}
	}
	delete(cand, i)
	out := make([]Neighbor, 0, len(cand))
	for j := range cand {
		if n := g.relevance(i, j); n.Relevance > 0 && (n.DirectLink || n.SharedSources > 0 || n.AdamicAdar > 0) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Relevance != out[b].Relevance {
			return out[a].Relevance > out[b].Relevance
		}
		return out[a].Path < out[b].Path
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// louvain partitions a weighted undirected graph into communities by the
// Louvain method (local moves, then aggregation, until modularity stops
// improving). It returns a community id per node (0-based, by first node)
// and the partition's modularity.
func louvain(adj []map[int]float64) ([]int, float64) {
	n := len(adj)
	// Work on slice adjacency for speed.
	type arc struct {
		to int
		w  float64
	}
	build := func(m []map[int]float64) [][]arc {
		out := make([][]arc, len(m))
		for i, nb := range m {
			for j, w := range nb {
				out[i] = append(out[i], arc{j, w})
			}
			sort.Slice(out[i], func(a, b int) bool { return out[i][a].to < out[i][b].to })
		}
		return out
	}
	g := build(adj)
	member := make([]int, n) // original node → current super-node
	for i := range member {
		member[i] = i
	}
	var m2 float64
	for _, arcs := range g {
		for _, a := range arcs {
			m2 += a.w
		}
	}
	if m2 == 0 {
		return compact(member), 0
	}
	for level := 0; level < 20; level++ {
		size := len(g)
		k := make([]float64, size)
		for i, arcs := range g {
			for _, a := range arcs {
				k[i] += a.w
				if a.to == i {
					k[i] += a.w // a self-loop counts twice in the degree
				}
			}
		}
		comm := make([]int, size)
		tot := make([]float64, size)
		for i := range comm {
			comm[i] = i
			tot[i] = k[i]
		}
		moved := false
		links := make([]float64, size)
		var touched []int
		for pass := 0; pass < 50; pass++ {
			changed := 0
			for i := 0; i < size; i++ {
				ci := comm[i]
				touched = touched[:0]
				for _, a := range g[i] {
					if a.to == i {
						continue
					}
					c := comm[a.to]
					if links[c] == 0 {
						touched = append(touched, c)
					}
					links[c] += a.w
				}
				tot[ci] -= k[i]
				best, bestGain := ci, links[ci]-tot[ci]*k[i]/m2
				for _, c := range touched {
					if gain := links[c] - tot[c]*k[i]/m2; gain > bestGain+1e-12 {
						best, bestGain = c, gain
					}
				}
				for _, c := range touched {
					links[c] = 0
				}
				links[ci] = 0
				tot[best] += k[i]
				if best != ci {
					comm[i] = best
					changed++
				}
			}
			if changed == 0 {
				break
			}
			moved = true
		}
		if !moved {
			break
		}
		ids := map[int]int{}
		for i := range comm {
			if _, ok := ids[comm[i]]; !ok {
				ids[comm[i]] = len(ids)
			}
		}
		for o := range member {
			member[o] = ids[comm[member[o]]]
		}
		agg := make([]map[int]float64, len(ids))
		for i := range agg {
			agg[i] = map[int]float64{}
		}
		for i, arcs := range g {
			ci := ids[comm[i]]
			for _, a := range arcs {
				agg[ci][ids[comm[a.to]]] += a.w
			}
		}
		g = build(agg)
	}
	out := compact(member)
	// Modularity of the final partition on the original graph.
	var q float64
	deg := make([]float64, n)
	totC := map[int]float64{}
	for i, nb := range adj {
		for _, w := range nb {
			deg[i] += w
		}
		totC[out[i]] += deg[i]
	}
	for i, nb := range adj {
		for j, w := range nb {
			if out[i] == out[j] {
				q += w
			}
		}
	}
	q /= m2
	for _, t := range totC {
		q -= (t / m2) * (t / m2)
	}
	return out, math.Round(q*10000) / 10000
}

// compact renumbers community ids 0, 1, … in order of first appearance.
func compact(member []int) []int {
	ids := map[int]int{}
	out := make([]int, len(member))
	for i, c := range member {
		if _, ok := ids[c]; !ok {
			ids[c] = len(ids)
		}
		out[i] = ids[c]
	}
	return out
}
