package sqlitedb_test

import (
	"testing"

	"modernc.org/memory"
)

// TestEngineAllocatorReusesFreedSlots guards the go.mod replace of
// modernc.org/memory, the pure-Go SQLite's allocator, by the patched copy in
// third_party: without it a fresh process page-faults through its first few
// hundred queries (docs/benchmarks/mail.md).
func TestEngineAllocatorReusesFreedSlots(t *testing.T) {
	var a memory.Allocator
	t.Cleanup(func() { a.Close() })
	// A long-lived slot keeps the size class's page in use, as SQLite's
	// prepared statements and schema do.
	if _, err := a.UintptrMalloc(1000); err != nil {
		t.Fatal(err)
	}
	freed, err := a.UintptrMalloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.UintptrFree(freed); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		p, err := a.UintptrMalloc(1000)
		if err != nil {
			t.Fatal(err)
		}
		if p != freed {
			t.Fatalf("malloc %d returned fresh memory %#x instead of the freed slot %#x: is go.mod's replace of modernc.org/memory by third_party/modernc.org/memory gone?", i, p, freed)
		}
		if err := a.UintptrFree(p); err != nil {
			t.Fatal(err)
		}
	}
}
