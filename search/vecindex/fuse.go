package vecindex

import (
	"strconv"

	"github.com/agentstack/agentstack/search"
)

// Fuse merges lexical candidates (row ids, best first) with vector
// neighbours by reciprocal rank fusion (search.RRF with its default k). It
// returns the row ids best first and each one's fused score.
func Fuse(lexical []int64, vector []Neighbor) (order []int64, scores map[int64]float64) {
	lists := [][]string{make([]string, len(lexical))}
	for i, id := range lexical {
		lists[0][i] = strconv.FormatInt(id, 10)
	}
	if vector != nil {
		v := make([]string, len(vector))
		for i, n := range vector {
			v[i] = strconv.FormatInt(n.ID, 10)
		}
		lists = append(lists, v)
	}
	fused := search.RRF(search.DefaultRRFK, lists...)
	order = make([]int64, 0, len(fused))
	scores = make(map[int64]float64, len(fused))
	for _, f := range fused {
		id, _ := strconv.ParseInt(f.ID, 10, 64)
		order = append(order, id)
		scores[id] = f.Score
	}
	return order, scores
}
