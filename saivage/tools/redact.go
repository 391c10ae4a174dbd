package tools

import "github.com/agentstack/agentstack/redact"

// NewRedactor returns the function that masks the given secrets and known
// credential patterns in text shown to models and operators (the shared
// redact.Secrets).
func NewRedactor(secrets []string) func(string) string { return redact.Secrets(secrets) }
