package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Gateway stream liveness (docs/protocol.md, "Model gateway: stream
// liveness"). A gateway that fails over between candidates inside one call
// can stay silent for as long as a stalled candidate's inactivity limit,
// which is as long as the client's own: the client would give up before the
// failover. A client that asks for it gets explicit liveness events instead
// while the gateway has nothing else to send; they renew only the client's
// inactivity clock, never its absolute limit, and are never content. SSE
// comments stay what the spec says they are: not progress.
const (
	// HeaderStreamLiveness asks for liveness events on a streamed chat
	// completion. Its value is the client's stream inactivity limit in
	// milliseconds, a positive integer.
	HeaderStreamLiveness = "X-Stream-Liveness"
	// LivenessEvent is the SSE event name ("event: liveness") of a liveness
	// event; its data is LivenessData.
	LivenessEvent = "liveness"
	// LivenessData is the data line of every liveness event.
	LivenessData = `{"object":"gateway.liveness"}`
	// MinLivenessInterval bounds how often a gateway sends liveness events.
	MinLivenessInterval = 50 * time.Millisecond
	// MaxLivenessLimit is the largest inactivity limit a client may declare
	// (one hour, the settings' upper bound).
	MaxLivenessLimit = time.Hour
)

// LivenessInterval is how long a gateway may send nothing to a client whose
// inactivity limit is limit before it sends a liveness event: a quarter of
// the limit, so that a slow write or a busy client still gets one in time.
func LivenessInterval(limit time.Duration) time.Duration {
	return max(limit/4, MinLivenessInterval)
}

// ParseStreamLiveness reads a HeaderStreamLiveness value: the client's
// inactivity limit. It is an error for anything but a whole number of
// milliseconds between 1 and MaxLivenessLimit.
func ParseStreamLiveness(v string) (time.Duration, error) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 1 || time.Duration(ms)*time.Millisecond > MaxLivenessLimit {
		return 0, fmt.Errorf("%s must be the client's stream inactivity limit in milliseconds (1 to %d), not %q",
			HeaderStreamLiveness, MaxLivenessLimit.Milliseconds(), v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// readStream is ReadSSE for a chat stream: a liveness event never reaches
// fn; with liveness (the client asked for them) it calls alive.
func readStream(r io.Reader, liveness bool, alive func() error, fn func(data []byte) error) error {
	sr := NewSSEReader(r)
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return ErrStreamTruncated
		}
		if err != nil {
			return fmt.Errorf("read model stream: %w", err)
		}
		if ev.Event == LivenessEvent {
			// Never content; progress only for a client that asked.
			if liveness {
				if err := alive(); err != nil {
					return err
				}
			}
			continue
		}
		if bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
			return nil
		}
		if err := fn(ev.Data); err != nil {
			return err
		}
	}
}

// inBandStatus is the HTTP status a gateway that had already sent liveness
// events could not send as one: the "http_status" of its in-band error
// (0 when absent).
func inBandStatus(data []byte) int {
	var c struct {
		Error struct {
			HTTPStatus int `json:"http_status"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &c) != nil {
		return 0
	}
	return c.Error.HTTPStatus
}
