package documents

import (
	"errors"
	"fmt"
)

// Error codes returned to the agent. They are stable: the host and tests
// match on them.
const (
	CodeInvalidArgument   = "invalid_argument"
	CodeBlocked           = "blocked_path"
	CodeNotFound          = "not_found"
	CodeNotRegular        = "not_a_regular_file"
	CodeUnsupported       = "unsupported_format"
	CodeTooLarge          = "file_too_large"
	CodeTimeout           = "extraction_timeout"
	CodeNoText            = "no_extractable_text"
	CodeEncrypted         = "encrypted_document"
	CodePasswordRequired  = "password_required"
	CodeArchiveLimit      = "archive_limit_exceeded"
	CodeMalformed         = "malformed_document"
	CodeChanged           = "file_changed_during_extraction"
	CodeStaleCursor       = "stale_cursor"
	CodeExtractionFailure = "extraction_failed"
)

// Error is a document failure with a stable code and a message a user
// understands. It never carries document content.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of a documents *Error in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
