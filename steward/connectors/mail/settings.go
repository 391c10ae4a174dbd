package mail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/steward/config"
)

// Settings are the mail connector's effective settings.
type Settings struct {
	Config *Config
	// DBPath and BlobDir locate the mirror under STEWARD_HOME/mail.
	DBPath, BlobDir string
	// EmbedEndpoint is the OpenAI-compatible API base (…/v1) that serves
	// embeddings; "" when embeddings are off, and then EmbedOff says why.
	EmbedEndpoint string
	EmbedOff      string
	EmbedModel    string
	EmbedMaxChars int
	EmbedBatch    int
	// ClassifyEndpoint is the OpenAI-compatible API base that classifies
	// mailboxes the name table cannot tell; "" when MAIL_CLASSIFY_ENDPOINT
	// is off, and then ClassifyOff says so.
	ClassifyEndpoint string
	ClassifyOff      string
	ClassifyModel    string
	// APIKey is GATEWAY_API_KEY, sent to the endpoint; it is never logged.
	APIKey string
}

// LoadSettings reads mail.yaml (MAIL_CONFIG, default STEWARD_HOME/mail.yaml;
// on macOS ~/Library/Mail is discovered when the file is absent) and the
// MAIL_EMBED_* settings.
func LoadSettings(cfg *config.Config, userHome string) (*Settings, error) {
	s := &Settings{
		DBPath:        filepath.Join(cfg.Home, "mail", "mail.db"),
		BlobDir:       filepath.Join(cfg.Home, "mail", "blobs"),
		EmbedModel:    cfg.String("MAIL_EMBED_MODEL", DefaultEmbedModel),
		EmbedMaxChars: int(cfg.Int("MAIL_EMBED_MAX_CHARS", 2000, 100, 32000)),
		EmbedBatch:    int(cfg.Int("MAIL_EMBED_BATCH", 32, 1, 256)),
		APIKey:        cfg.String("GATEWAY_API_KEY", ""),
		ClassifyModel: cfg.String("MAIL_CLASSIFY_MODEL", DefaultClassifyModel),
	}
	switch ep := cfg.String("MAIL_CLASSIFY_ENDPOINT", "gateway"); strings.ToLower(ep) {
	case "off", "none", "disabled", "0", "false":
		s.ClassifyOff = "MAIL_CLASSIFY_ENDPOINT=" + ep
	case "gateway":
		s.ClassifyEndpoint = embedBaseURL(cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1"))
	default:
		s.ClassifyEndpoint = strings.TrimSuffix(embedBaseURL(cfg.URL("MAIL_CLASSIFY_ENDPOINT", "")), "/chat/completions")
	}
	switch ep := cfg.String("MAIL_EMBED_ENDPOINT", "gateway"); strings.ToLower(ep) {
	case "off", "none", "disabled", "0", "false":
		s.EmbedOff = "MAIL_EMBED_ENDPOINT=" + ep
	case "gateway":
		s.EmbedEndpoint = embedBaseURL(cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1"))
	default:
		s.EmbedEndpoint = embedBaseURL(cfg.URL("MAIL_EMBED_ENDPOINT", ""))
	}
	if err := cfg.Err(); err != nil {
		return nil, err
	}
	path := cfg.Path("MAIL_CONFIG", filepath.Join(cfg.Home, "mail.yaml"))
	if err := cfg.Err(); err != nil {
		return nil, err
	}
	c, err := LoadConfig(path)
	switch {
	case err == nil:
		s.Config = c
	case errors.Is(err, fs.ErrNotExist) && runtime.GOOS == "darwin" && userHome != "":
		if s.Config, err = DiscoverAppleMail(filepath.Join(userHome, "Library", "Mail")); err != nil {
			return nil, fmt.Errorf("%s does not exist and Apple Mail was not found: %w", path, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: create %s, for example:\n\naccounts:\n  - name: personal\n    kind: maildir\n    root: %s\n    addresses: [me@example.com]",
			ErrNoConfig, path, filepath.Join(userHome, "Mail"))
	default:
		return nil, err
	}
	return s, nil
}

// Embedder returns the embedder (the shared llm client) attributed to
// service/action, or nil when embeddings are off.
func (s *Settings) Embedder(service, action string) Embedder {
	if s.EmbedEndpoint == "" {
		return nil
	}
	model := s.EmbedModel
	if model == "" {
		model = DefaultEmbedModel
	}
	return endpointEmbedder{search.NewEmbedder(search.EmbedderOptions{BaseURL: s.EmbedEndpoint, APIKey: s.APIKey, Model: model,
		Attribution: llm.Attribution{Service: service, Action: action}, Timeout: embedTimeout, Partial: true})}
}

// UserHome returns the user's home directory, or "".
func UserHome() string {
	h, _ := os.UserHomeDir()
	return h
}
