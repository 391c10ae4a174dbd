//go:build !csqlite

package csqlite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentstack/agentstack/sqlitedb/csqlite"
)

func TestWithoutTheTagOpenExplains(t *testing.T) {
	db, err := csqlite.Open(context.Background(), "/nonexistent")
	if db != nil || !errors.Is(err, csqlite.ErrNotBuilt) {
		t.Fatalf("Open = %v, %v; want ErrNotBuilt", db, err)
	}
	if csqlite.Built || csqlite.Version() != "" {
		t.Error("a build without the tag claims a C engine")
	}
}
