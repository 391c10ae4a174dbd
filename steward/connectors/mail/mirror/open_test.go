package mirror

import "testing"

// The mirror's connection keeps a 64 MiB page cache (index pages of a large
// archive stay warm while ingesting), set with the connection's pragmas.
func TestOpenSetsPageCache(t *testing.T) {
	acct, _ := maildirAccount(t, "m", false)
	s := openStore(t, acct)
	var kib int64
	if err := s.db.QueryRow("PRAGMA cache_size").Scan(&kib); err != nil {
		t.Fatal(err)
	}
	if kib != -65536 {
		t.Errorf("cache_size = %d, want -65536 (64 MiB)", kib)
	}
}
