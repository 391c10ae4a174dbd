package wiki

import (
	"context"
	"testing"
)

// openService opens a Service for the test and closes it at the end.
func openService(t testing.TB, opts Options) *Service {
	t.Helper()
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
