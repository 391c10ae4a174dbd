//go:build !darwin

package search

// NewLiveMailReader returns nil: outside macOS there is no mail client to
// ask, and reads return the mirrored body.
func NewLiveMailReader() LiveMailReader { return nil }
