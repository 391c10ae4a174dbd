package llm

import (
	"errors"
	"net"
	"net/http"
)

// UnreachableCode is the error code a gateway answers, with status 502,
// when no provider of the model accepted a connection: nothing listens
// where each is configured (a local model server that is not running).
const UnreachableCode = "upstream_unreachable"

// IsUnreachable reports whether err says the model could not be reached at
// all: the endpoint itself refused the connection (or its name did not
// resolve), or a gateway answered UnreachableCode. Callers that treat an
// absent local service as "not running" rather than as a failure test it;
// a model that answers with an error is not unreachable.
func IsUnreachable(err error) bool {
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusBadGateway && ae.Code == UnreachableCode
}
