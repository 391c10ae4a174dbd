package documents

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// docKey identifies one version of a file: canonical path, size and mtime.
type docKey struct {
	path  string
	size  int64
	mtime int64 // UnixNano
}

// fingerprint is the short hash of the key that cursors carry.
func (k docKey) fingerprint() string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", k.path, k.size, k.mtime))
	return hex.EncodeToString(h[:8])
}

// document is one extracted file with its lazily built search state.
type document struct {
	key      docKey
	fp       string
	modified time.Time
	ex       *Extracted

	mu       sync.Mutex
	chunks   []chunk              // built on first search
	postings map[string][]posting // term → chunks, built with chunks
	vecSig   string               // embedder identity the vectors belong to
	vecs     [][]float32          // by chunk ID; nil = missing (retried on a later search)
}

// estimatedBytes approximates the memory the entry holds: text, folded
// chunk text and vectors.
func (d *document) estimatedBytes() int64 {
	var n int64
	for _, p := range d.ex.Pages {
		n += int64(len(p.Text))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.chunks {
		n += int64(len(c.folded)) + 64
	}
	for t, list := range d.postings {
		n += int64(len(t)) + 48 + int64(len(list))*8
	}
	for _, v := range d.vecs {
		n += int64(len(v)) * 4
	}
	return n
}

// docCache is the process-local LRU of extracted documents, bounded by
// entry count and estimated bytes.
type docCache struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	order      *list.List // front = most recently used; values are *document
	byKey      map[docKey]*list.Element
}

func newDocCache(maxEntries int, maxBytes int64) *docCache {
	return &docCache{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), byKey: map[docKey]*list.Element{}}
}

func (c *docCache) get(k docKey) *document {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*document)
	}
	return nil
}

// put inserts d, dropping other versions of the same path, then evicts.
func (c *docCache) put(d *document) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.byKey {
		if k.path == d.key.path && k != d.key {
			c.order.Remove(e)
			delete(c.byKey, k)
		}
	}
	if e, ok := c.byKey[d.key]; ok {
		c.order.Remove(e)
	}
	c.byKey[d.key] = c.order.PushFront(d)
	c.evictLocked()
}

// evict re-applies the bounds, after vectors were added to an entry.
func (c *docCache) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked()
}

func (c *docCache) evictLocked() {
	var total int64
	for e := c.order.Front(); e != nil; e = e.Next() {
		total += e.Value.(*document).estimatedBytes()
	}
	for c.order.Len() > 0 && (c.order.Len() > c.maxEntries || total > c.maxBytes) {
		e := c.order.Back()
		d := e.Value.(*document)
		total -= d.estimatedBytes()
		c.order.Remove(e)
		delete(c.byKey, d.key)
	}
}

// clear empties the cache (benchmarks measure uncached extraction).
func (c *docCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	c.byKey = map[docKey]*list.Element{}
}

func (c *docCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
