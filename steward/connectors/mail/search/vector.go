package search

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"runtime"
	"sort"
	"strconv"
	"sync"

	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// vectorIndex is the in-memory KNN index over the mirror's embeddings. Each
// vector is kept twice, compactly: as int8 codes (from embed_state.q) and as
// one sign bit per dimension after centring on the corpus mean. A query
// ranks every vector by Hamming distance on the bits (a few milliseconds
// for 78,000 × 1,024), re-ranks the best candidates by int8 dot product
// (cosine, as the vectors are unit length), and returns the top k. Both
// stages are exact scans over compact data, so recall against exact float
// search depends only on the candidate pool, which the benchmark measures.
type vectorIndex struct {
	load    sync.Mutex // one refresh at a time
	mu      sync.RWMutex
	dim     int
	words   int // uint64 words per bit code
	gen     string
	lastSeq int64
	ids     []int64
	slot    map[int64]int
	scales  []float32
	codes   []int8
	bits    []uint64
	mean    []float32
}

// hit is one KNN result.
type hit struct {
	id    int64
	score float32 // cosine similarity
}

// refresh loads vectors added since the last call; a new generation (the
// embedding model or dimension changed) reloads everything.
func (v *vectorIndex) refresh(ctx context.Context, db *sql.DB) (int, error) {
	v.load.Lock()
	defer v.load.Unlock()
	var gen, dimS string
	var maxSeq sql.NullInt64
	err := db.QueryRowContext(ctx, `SELECT
		coalesce((SELECT value FROM meta WHERE key = 'vec_generation'), ''),
		coalesce((SELECT value FROM meta WHERE key = 'vec_dim'), ''),
		(SELECT max(seq) FROM embed_state)`).Scan(&gen, &dimS, &maxSeq)
	if err != nil {
		return 0, fmt.Errorf("check vector index: %w", err)
	}
	dim, _ := strconv.Atoi(dimS)
	v.mu.RLock()
	fresh := gen == v.gen && dim == v.dim && maxSeq.Int64 == v.lastSeq
	full := gen != v.gen || dim != v.dim
	since := v.lastSeq
	v.mu.RUnlock()
	if fresh {
		return 0, nil
	}
	if full {
		since = 0
	}
	rows, err := db.QueryContext(ctx, "SELECT message_id, seq, q FROM embed_state WHERE seq > ? AND dim = ? ORDER BY seq", since, dim)
	if err != nil {
		return 0, fmt.Errorf("load vectors: %w", err)
	}
	defer rows.Close()
	type loaded struct {
		id    int64
		scale float32
		q     []int8
	}
	var batch []loaded
	last := since
	for rows.Next() {
		var id, seq int64
		var blob []byte
		if err := rows.Scan(&id, &seq, &blob); err != nil {
			return 0, err
		}
		scale, q, err := mail.DecodeInt8(blob)
		if err != nil || len(q) != dim {
			continue
		}
		batch = append(batch, loaded{id, scale, q})
		last = max(last, seq)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if full {
		v.dim, v.gen, v.words = dim, gen, (dim+63)/64
		v.ids, v.scales, v.codes, v.bits, v.slot = nil, nil, nil, nil, map[int64]int{}
		// The centre for the sign bits: the mean of the loaded vectors.
		v.mean = make([]float32, dim)
		for _, l := range batch {
			for i, c := range l.q {
				v.mean[i] += l.scale * float32(c)
			}
		}
		if len(batch) > 0 {
			for i := range v.mean {
				v.mean[i] /= float32(len(batch))
			}
		}
	}
	for _, l := range batch {
		s, ok := v.slot[l.id]
		if !ok {
			s = len(v.ids)
			v.slot[l.id] = s
			v.ids = append(v.ids, l.id)
			v.scales = append(v.scales, 0)
			v.codes = append(v.codes, make([]int8, dim)...)
			v.bits = append(v.bits, make([]uint64, v.words)...)
		}
		v.scales[s] = l.scale
		copy(v.codes[s*dim:], l.q)
		signBits(v.bits[s*v.words:(s+1)*v.words], l.q, l.scale, v.mean)
	}
	v.lastSeq = max(v.lastSeq, last)
	if full {
		v.lastSeq = last
	}
	return len(batch), nil
}

func signBits(dst []uint64, q []int8, scale float32, mean []float32) {
	clear(dst)
	for i, c := range q {
		if scale*float32(c) > mean[i] {
			dst[i/64] |= 1 << (i % 64)
		}
	}
}

func (v *vectorIndex) size() (n, dim int) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.ids), v.dim
}

// search returns the k nearest vectors to query by cosine similarity.
func (v *vectorIndex) search(query []float32, k int) ([]hit, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if len(query) != v.dim {
		return nil, fmt.Errorf("query vector has %d dimensions, the mail index %d", len(query), v.dim)
	}
	n := len(v.ids)
	if n == 0 || k <= 0 {
		return nil, nil
	}
	qb := mail.QuantizeInt8(query)
	qscale, qq, _ := mail.DecodeInt8(qb)
	qbits := make([]uint64, v.words)
	signBits(qbits, qq, qscale, v.mean)

	pool := max(40*k, 2000)
	var cands []int
	if pool >= n {
		cands = make([]int, n)
		for i := range cands {
			cands[i] = i
		}
	} else {
		cands = v.hammingCandidates(qbits, pool)
	}
	hits := make([]hit, len(cands))
	parallel(len(cands), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			s := cands[j]
			hits[j] = hit{id: v.ids[s], score: float32(dotInt8(qq, v.codes[s*v.dim:(s+1)*v.dim])) * v.scales[s] * qscale}
		}
	})
	sort.Slice(hits, func(a, b int) bool {
		if hits[a].score != hits[b].score {
			return hits[a].score > hits[b].score
		}
		return hits[a].id > hits[b].id
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// hammingCandidates returns the slots of the pool vectors with the smallest
// Hamming distance to qbits, by counting sort over the distances.
func (v *vectorIndex) hammingCandidates(qbits []uint64, pool int) []int {
	n, w := len(v.ids), v.words
	dist := make([]uint16, n)
	parallel(n, func(lo, hi int) {
		for s := lo; s < hi; s++ {
			b := v.bits[s*w : (s+1)*w]
			d := 0
			for i, x := range b {
				d += bits.OnesCount64(x ^ qbits[i])
			}
			dist[s] = uint16(d)
		}
	})
	hist := make([]int, v.dim+2)
	for _, d := range dist {
		hist[d]++
	}
	threshold, acc := 0, 0
	for threshold = 0; threshold <= v.dim; threshold++ {
		acc += hist[threshold]
		if acc >= pool {
			break
		}
	}
	out := make([]int, 0, acc)
	for s, d := range dist {
		if int(d) <= threshold {
			out = append(out, s)
		}
	}
	return out
}

func dotInt8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// parallel splits [0, n) across the available cores when n is large enough
// to pay for the goroutines.
func parallel(n int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < 4096 || workers < 2 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}
