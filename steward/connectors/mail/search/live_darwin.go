//go:build darwin

package search

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// osascriptReader reads message bodies from Mail.app.
type osascriptReader struct{}

// NewLiveMailReader returns the AppleScript reader on macOS.
func NewLiveMailReader() LiveMailReader { return osascriptReader{} }

func (osascriptReader) ReadBody(ctx context.Context, ref LiveRef) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/osascript", "-")
	cmd.Stdin = strings.NewReader(AppleScriptForBody(ref))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("read message from Mail: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimRight(out.String(), "\n"), nil
}
