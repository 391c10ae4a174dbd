// Package csqlite opens a store read-only through C SQLite, for benchmarks
// that hold the pure-Go engine (modernc.org/sqlite) to "within 2× of the same
// SQL through C SQLite". It uses the cgo driver github.com/mattn/go-sqlite3,
// which bundles the same SQLite release as the pure-Go driver (3.54.1 for
// both at the versions in go.mod), so a ratio compares engines, not releases,
// and both sides run through the same database/sql harness in one process.
// sqlite-vec comes from its own cgo bindings (github.com/asg017/sqlite-vec-go-bindings),
// compiled against the system's sqlite3.h (Debian: libsqlite3-dev).
//
// The C engine is compiled in only with the build tags csqlite and fts5 and a
// C compiler:
//
//	go build -tags 'csqlite fts5' -o steward ./cmd/steward
//
// Without them Open returns ErrNotBuilt and the benchmarks report the C
// baseline as skipped. The product itself never uses this package.
package csqlite

import "errors"

// ErrNotBuilt reports a binary built without the C engine.
var ErrNotBuilt = errors.New("C SQLite baseline not built in: rebuild with `go build -tags 'csqlite fts5'` (needs gcc)")
