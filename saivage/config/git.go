package config

import (
	"path"
	"slices"
	"strconv"
	"strings"
)

// Values of the native Git workflow this build honours. A value outside
// these is refused by Validate with what is supported, never accepted and
// ignored.
const (
	// GitIntegrationSquash delivers each approved card as one squash commit.
	GitIntegrationSquash = "squash"
	// GitPreserveSnapshot keeps a failed rebase as a checkpointed snapshot
	// (conflicted files with their markers) on the card's private ref.
	GitPreserveSnapshot = "snapshot"
	// GitCheckpointPrivateRef checkpoints source on the card's private ref.
	GitCheckpointPrivateRef = "private_ref"
	// DefaultPrivateRefNamespace is where cards' private refs live when
	// private_ref_namespace is omitted.
	DefaultPrivateRefNamespace = "refs/saivage"
	// MaxExcludedPaths bounds git_workflow.excluded_paths.
	MaxExcludedPaths = 256
)

// GitOn reports whether the configuration enables the native Git workflow.
func (c *Config) GitOn() bool { return c != nil && c.GitWorkflow != nil && c.GitWorkflow.Enabled }

// RefNamespace returns the private ref namespace (the default when
// omitted), without a trailing slash.
func (g *GitWorkflow) RefNamespace() string {
	if g.PrivateRefNamespace == "" {
		return DefaultPrivateRefNamespace
	}
	return g.PrivateRefNamespace
}

// IntegrationMode returns integration, defaulting to squash.
func (g *GitWorkflow) IntegrationMode() string { return cmpOr(g.Integration, GitIntegrationSquash) }

// RebasePreservation returns preservation.interrupted_rebase (default
// snapshot).
func (g *GitWorkflow) RebasePreservation() string {
	if g.Preservation == nil {
		return GitPreserveSnapshot
	}
	return cmpOr(g.Preservation.InterruptedRebase, GitPreserveSnapshot)
}

// CheckpointPreservation returns preservation.source_checkpoint (default
// private_ref).
func (g *GitWorkflow) CheckpointPreservation() string {
	if g.Preservation == nil {
		return GitCheckpointPrivateRef
	}
	return cmpOr(g.Preservation.SourceCheckpoint, GitCheckpointPrivateRef)
}

// Roots returns source_roots, defaulting to the whole checkout (".").
func (g *GitWorkflow) Roots() []string {
	if len(g.SourceRoots) == 0 {
		return []string{"."}
	}
	return slices.Clone(g.SourceRoots)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// git validates the git_workflow section: the OFF variant exactly, the ON
// variant with every field either honoured or refused by name.
func (v *validator) git(cfg *Config) {
	g := cfg.GitWorkflow
	if g == nil {
		return
	}
	if g.FormatVersion != 1 {
		v.fail("git_workflow.format_version", "must be 1")
	}
	if !g.Enabled {
		if g.Correction != nil || g.DeliveryBranch != "" || g.ExcludedPaths != nil || g.Integration != "" ||
			g.Preservation != nil || g.PrivateRefNamespace != "" || g.ReviewBindings != nil || g.SourceRoots != nil {
			v.fail("git_workflow", "with enabled: false only format_version may be set (set enabled: true for the native Git workflow)")
		}
		return
	}
	const p = "git_workflow"
	switch {
	case g.DeliveryBranch == "":
		v.fail(p+".delivery_branch", "required with enabled: true: the branch reviewed changes are delivered to (for example main)")
	case !ValidBranchName(g.DeliveryBranch):
		v.fail(p+".delivery_branch", "%q is not a valid Git branch name", g.DeliveryBranch)
	}
	if g.Integration != "" && g.Integration != GitIntegrationSquash {
		v.fail(p+".integration", "%q is not supported; this build delivers each approved card as one commit (integration: squash)", g.Integration)
	}
	if pr := g.Preservation; pr != nil {
		if pr.InterruptedRebase != "" && pr.InterruptedRebase != GitPreserveSnapshot {
			v.fail(p+".preservation.interrupted_rebase", "%q is not supported; a failed rebase is preserved as a checkpointed snapshot (snapshot)", pr.InterruptedRebase)
		}
		if pr.SourceCheckpoint != "" && pr.SourceCheckpoint != GitCheckpointPrivateRef {
			v.fail(p+".preservation.source_checkpoint", "%q is not supported; checkpoints are commits on the card's private ref (private_ref)", pr.SourceCheckpoint)
		}
	}
	if ns := g.PrivateRefNamespace; ns != "" {
		if msg := privateNamespaceProblem(ns); msg != "" {
			v.fail(p+".private_ref_namespace", "%q %s", ns, msg)
		}
	}
	if len(g.ExcludedPaths) > MaxExcludedPaths {
		v.fail(p+".excluded_paths", "at most %d paths", MaxExcludedPaths)
	}
	for i, e := range g.ExcludedPaths {
		if msg := relPathProblem(e); msg != "" {
			v.fail(p+".excluded_paths["+strconv.Itoa(i)+"]", "%q %s", e, msg)
		}
	}
	for i, r := range g.SourceRoots {
		if r != "." {
			v.fail(p+".source_roots["+strconv.Itoa(i)+"]", "%q is not supported; this build captures the whole checkout (source_roots: [\".\"]); use excluded_paths to leave paths out", r)
		}
	}
	if len(g.ReviewBindings) == 0 {
		v.fail(p+".review_bindings", "required with enabled: true: at least one card type whose approved review delivers source (for example task: {node: review, approved_outcome: approved})")
	}
	for _, ct := range sortedKeys(g.ReviewBindings) {
		b := g.ReviewBindings[ct]
		bp := p + ".review_bindings." + ct
		decl, ok := cfg.CardTypes[ct]
		switch {
		case !ok:
			v.fail(bp, "unknown card type %q", ct)
		case b.Node == "":
			v.fail(bp+".node", "required: the review node whose approval delivers the card's source")
		case b.ApprovedOutcome == "":
			v.fail(bp+".approved_outcome", "required: the outcome or case id of %s that approves", b.Node)
		default:
			if _, ok := decl.Workflow.Nodes[b.Node]; !ok {
				v.fail(bp+".node", "card type %s has no node %q", ct, b.Node)
			}
		}
	}
	c := g.Correction
	switch {
	case c == nil:
		v.fail(p+".correction", "required with enabled: true: the agent and prompt that resolve a failed rebase or refused source")
	case c.Agent == "":
		v.fail(p+".correction.agent", "required")
	case c.Prompt == nil || c.Prompt.Reference == "":
		v.fail(p+".correction.prompt", "required (for example {reference: prompts/nodes/git-correction.md})")
	default:
		a, ok := cfg.Agents[c.Agent]
		switch {
		case !ok:
			v.fail(p+".correction.agent", "unknown agent %q", c.Agent)
		case a.Session != "card":
			v.fail(p+".correction.agent", "agent %q must run in card sessions", c.Agent)
		case !slices.Contains(a.Tools, "checkpoint_source"):
			v.fail(p+".correction.agent", "agent %q must hold checkpoint_source to publish its correction", c.Agent)
		}
	}
}

// ValidBranchName reports whether name is a branch name Git accepts
// (git check-ref-format --branch rules, without @{-N} shorthands).
func ValidBranchName(name string) bool {
	return !strings.HasPrefix(name, "-") && name != "HEAD" && validRefName("refs/heads/"+name)
}

// validRefName applies git check-ref-format's rules to a full ref name.
func validRefName(ref string) bool {
	if ref == "@" || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") || strings.Contains(ref, "@{") || strings.Contains(ref, "..") {
		return false
	}
	for _, comp := range strings.Split(ref, "/") {
		if comp == "" || strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return false
		}
		for _, r := range comp {
			if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
				return false
			}
		}
	}
	return true
}

// privateNamespaceProblem explains why ns cannot hold private refs.
func privateNamespaceProblem(ns string) string {
	switch {
	case !strings.HasPrefix(ns, "refs/") || strings.Count(ns, "/") < 1 || ns == "refs/":
		return "must be a ref namespace under refs/ (for example refs/saivage)"
	case !validRefName(ns):
		return "is not a valid Git ref name (no trailing slash, spaces, '..', '~^:?*[\\')"
	}
	for _, public := range []string{"refs/heads", "refs/tags", "refs/remotes", "refs/notes", "refs/stash", "refs/bisect", "refs/replace"} {
		if ns == public || strings.HasPrefix(ns, public+"/") {
			return "is a namespace Git or users own; private refs need their own (for example refs/saivage)"
		}
	}
	return ""
}

// relPathProblem explains why p is not a clean relative path of the
// checkout. Excluded paths are literal paths (a file, or a directory and
// everything below it), not patterns.
func relPathProblem(p string) string {
	switch {
	case p == "":
		return "is empty"
	case strings.HasPrefix(p, "/"):
		return "must be relative to the checkout"
	case strings.ContainsAny(p, "*?[\\\x00"):
		return "must be a literal path (a file or a directory), not a pattern"
	case path.Clean(strings.TrimSuffix(p, "/")) != strings.TrimSuffix(p, "/") || p == "." || strings.HasPrefix(p, "../") || p == "..":
		return "must be a clean path inside the checkout (no ., .. or doubled slashes)"
	case p == ".git" || strings.HasPrefix(p, ".git/"):
		return "is Git's own directory, which is never captured"
	}
	return ""
}
