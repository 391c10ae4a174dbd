// Copyright 2026 The Memory Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package memory // import "modernc.org/memory"

import "testing"

// TestFreedSlotReusedBeforeCarving checks the agentstack patch: with a
// long-lived slot keeping the class's page in use, a malloc/free loop gets
// the same slot back every time instead of walking fresh memory.
func TestFreedSlotReusedBeforeCarving(t *testing.T) {
	for _, size := range []int{16, 200, 1000, 3000, 1 << maxSlotSizeLog} {
		var a Allocator
		keep, err := a.UintptrMalloc(size)
		if err != nil {
			t.Fatal(err)
		}
		first, err := a.UintptrMalloc(size)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.UintptrFree(first); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			p, err := a.UintptrMalloc(size)
			if err != nil {
				t.Fatal(err)
			}
			if p != first {
				t.Fatalf("size %d, round %d: malloc returned %#x, want the freed slot %#x", size, i, p, first)
			}
			if err := a.UintptrFree(p); err != nil {
				t.Fatal(err)
			}
		}
		// Two live slots still get distinct addresses: carving goes on once
		// the free list is empty.
		p, _ := a.UintptrMalloc(size)
		q, _ := a.UintptrMalloc(size)
		if p == q || p == keep || q == keep {
			t.Fatalf("size %d: live slots share an address: keep %#x, p %#x, q %#x", size, keep, p, q)
		}
		for _, x := range []uintptr{p, q, keep} {
			if err := a.UintptrFree(x); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
