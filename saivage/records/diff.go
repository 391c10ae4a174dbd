package records

import (
	"fmt"
	"strings"
)

// maxDiffCells bounds the line-diff table (changed lines of a × of b);
// larger changes get a summary line instead.
const maxDiffCells = 4_000_000

// Diff returns a unified line diff from a to b labelled with the two names.
// Identical inputs give "".
func Diff(aName, bName, a, b string) string {
	if a == b {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", aName, bName)
	ops, ok := lcsOps(al, bl)
	if !ok {
		fmt.Fprintf(&sb, "@@ too large to diff: %d lines → %d lines @@\n", len(al), len(bl))
		return sb.String()
	}
	for _, op := range ops {
		sb.WriteByte(op.kind)
		sb.WriteString(op.line)
		sb.WriteByte('\n')
	}
	return sb.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

type diffOp struct {
	kind byte
	line string
}

// lcsOps computes an edit script from the longest common subsequence after
// trimming the common prefix and suffix.
func lcsOps(a, b []string) ([]diffOp, bool) {
	var ops []diffOp
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		ops = append(ops, diffOp{' ', a[pre]})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n*m > maxDiffCells {
		return nil, false
	}
	dp := make([][]int32, n+1)
	for i := range dp {
		dp[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && ma[i] == mb[j]:
			ops = append(ops, diffOp{' ', ma[i]})
			i++
			j++
		case j < m && (i == n || dp[i][j+1] >= dp[i+1][j]):
			ops = append(ops, diffOp{'+', mb[j]})
			j++
		default:
			ops = append(ops, diffOp{'-', ma[i]})
			i++
		}
	}
	for k := len(a) - suf; k < len(a); k++ {
		ops = append(ops, diffOp{' ', a[k]})
	}
	return ops, true
}
