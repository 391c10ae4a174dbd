//go:build !csqlite

package csqlite

import (
	"context"
	"database/sql"
)

// Built says whether this binary carries the C engine.
const Built = false

// Open reports ErrNotBuilt: this binary has no C engine.
func Open(context.Context, string, ...string) (*sql.DB, error) { return nil, ErrNotBuilt }

// Version is empty without the C engine.
func Version() string { return "" }

// VecVersion reports ErrNotBuilt.
func VecVersion(context.Context, *sql.DB) (string, error) { return "", ErrNotBuilt }
