package gitsource

import (
	"context"
)

// Repo is one commissioned (or to-be-commissioned) checkout.
type Repo struct {
	opts Options
	ns   string
}

// Open checks the git binary (MinGitVersion) and the checkout and returns a
// Repo.
func Open(ctx context.Context, opts Options) (*Repo, error) {
	return nil, errNotImplemented
}

// Command is one Git invocation through the managed runner.
type Command struct {
	Args []string
	// Stdin, when HasStdin, is given exactly to git.
	Stdin    []byte
	HasStdin bool
	// IndexFile, when set, is the GIT_INDEX_FILE (a private index).
	IndexFile string
	// Env is added to the child's environment.
	Env []string
}

// Output is a successful command's output.
type Output struct {
	Stdout, Stderr []byte
}

// Git runs one Git argv in its own managed process group in the checkout.
// Anything but an exit-zero leader with no surviving group member is a
// *CommandError.
func (r *Repo) Git(ctx context.Context, c Command) (Output, error) {
	return Output{}, errNotImplemented
}
