package config

import "strings"

// Var documents one setting that Steward reads from the environment or from
// STEWARD_HOME/config.env. The table is the single list shown by
// `steward config` and used to catch misspelt keys in config.env.
type Var struct {
	Name    string
	Default string
	Purpose string
	Secret  bool // never printed
}

// Vars lists every setting Steward knows. Add a row when a package starts
// reading a new variable.
var Vars = []Var{
	{Name: "STEWARD_HOME", Default: "platform data directory", Purpose: "Directory holding every Steward store, token and config file."},
	{Name: "STEWARD_LOG_LEVEL", Default: "info", Purpose: "Log level: debug, info, warn or error."},
	{Name: "HOST_PORT", Default: "4317", Purpose: "Host HTTP port on 127.0.0.1."},
	{Name: "HOST_ALLOWED_ORIGINS", Purpose: "Extra allowed browser origins, comma-separated."},
	{Name: "STEWARD_AUTH_TOKEN", Purpose: "Override the persisted host auth token.", Secret: true},
	{Name: "STEWARD_TLS_CERT", Purpose: "Certificate for the optional HTTPS listener."},
	{Name: "STEWARD_TLS_KEY", Purpose: "Key for the optional HTTPS listener.", Secret: true},
	{Name: "STEWARD_TLS_PORT", Default: "HOST_PORT+1", Purpose: "HTTPS listener port."},
	{Name: "GATEWAY_BASE_URL", Default: "http://127.0.0.1:4000/v1", Purpose: "Where the host reaches the gateway; set it to use a gateway running elsewhere instead of the in-process one."},
	{Name: "GATEWAY_PORT", Default: "4000", Purpose: "Gateway port on 127.0.0.1."},
	{Name: "GATEWAY_CONFIG", Default: "$STEWARD_HOME/gateway.yaml", Purpose: "Gateway providers, models and rates."},
	{Name: "GATEWAY_API_KEY", Purpose: "Bearer key required on the gateway's model routes when set.", Secret: true},
	{Name: "GATEWAY_REQUEST_TIMEOUT_MS", Default: "120000", Purpose: "One deadline shared by every attempt of a gateway request, stream included (1000–3600000)."},
	{Name: "MODEL_STREAM_INACTIVITY_MS", Default: "40000", Purpose: "How long a model may send nothing, from the request on, before its attempt fails and the gateway tries the next candidate (1000–3600000; unset: 40000, or a third of a shorter GATEWAY_REQUEST_TIMEOUT_MS, so a stall leaves the next candidates time within the shared deadline); raise it, with GATEWAY_REQUEST_TIMEOUT_MS, for a slow local model. With GATEWAY_BASE_URL set it is also how long the host waits for the gateway to send data or a liveness event (docs/protocol.md) before the call fails."},
	{Name: "HOST_TIER", Default: "tier-5", Purpose: "Public model name the agent uses."},
	{Name: "DEEPSEEK_API_KEY", Purpose: "DeepSeek key for the default paid tiers.", Secret: true},
	{Name: "MODEL_API_KEY", Purpose: "Key of the provider chosen with `steward setup` or the first-run screen (gateway.yaml names it).", Secret: true},
	{Name: "APPROVAL_TIMEOUT_MS", Default: "300000", Purpose: "How long a gated action waits for approval before it is denied."},
	{Name: "MAIL_CONFIG", Default: "$STEWARD_HOME/mail.yaml", Purpose: "Mail accounts."},
	{Name: "MAIL_EMBED_ENDPOINT", Default: "gateway", Purpose: "Mail embedding endpoint; off disables."},
	{Name: "MAIL_EMBED_MODEL", Default: "local-embed", Purpose: "Model name sent to the mail embedding endpoint."},
	{Name: "MAIL_EMBED_MAX_CHARS", Default: "2000", Purpose: "Characters of subject + body embedded per message (100–32000)."},
	{Name: "MAIL_EMBED_BATCH", Default: "32", Purpose: "Messages per mail embedding request (1–256)."},
	{Name: "MAIL_CLASSIFY_ENDPOINT", Default: "gateway", Purpose: "Classifies mailboxes whose role the name table cannot tell; off leaves them other."},
	{Name: "MAIL_CLASSIFY_MODEL", Default: "tier-2", Purpose: "Model name sent to the mail classification endpoint."},
	{Name: "MAIL_PROMOTER_LLM_ENDPOINT", Default: "http://127.0.0.1:4000/v1/chat/completions", Purpose: "Chat-completions endpoint of mail → wiki promotion (gateway: GATEWAY_BASE_URL); off disables promotion."},
	{Name: "MAIL_PROMOTER_MODEL", Default: "tier-5", Purpose: "Model name of the promotion's triage and distillation call."},
	{Name: "MAIL_PROMOTER_CONCURRENCY", Default: "10", Purpose: "Threads `steward mail promote` triages in parallel (1–64)."},
	{Name: "CALENDAR_CONFIG", Default: "$STEWARD_HOME/calendar.yaml", Purpose: "Calendar sources."},
	{Name: "CONTACTS_CONFIG", Default: "$STEWARD_HOME/contacts.yaml", Purpose: "Contacts sources."},
	{Name: "CALENDAR_INDEX_DB", Default: "$STEWARD_HOME/calendar-index.sqlitedb", Purpose: "Calendar index path."},
	{Name: "CONTACTS_INDEX_DB", Default: "$STEWARD_HOME/contacts-index.sqlitedb", Purpose: "Contacts index path."},
	{Name: "STEWARD_CALENDAR_BRIDGE_DIR", Purpose: "EventKit bridge folder (macOS), set by the Steward launcher for its children; Apple Calendar writes go through it, else through Calendar.app's AppleScript."},
	{Name: "DOCUMENT_MAX_BYTES", Default: "26214400", Purpose: "Largest document read, capped at 100 MiB."},
	{Name: "DOCUMENT_EXTRACT_TIMEOUT_MS", Default: "15000", Purpose: "Document extraction deadline, 1–60 s."},
	{Name: "DOCUMENT_MAX_EXTRACTED_CHARS", Default: "8000000", Purpose: "Extracted text budget per document, at most 32 M."},
	{Name: "DOCUMENT_ARCHIVE_MAX_BYTES", Default: "67108864", Purpose: "Declared Office ZIP expansion limit, at most 256 MiB."},
	{Name: "DOCUMENT_CACHE_MAX_BYTES", Default: "67108864", Purpose: "Extracted document cache budget, at most 256 MiB."},
	{Name: "DOCUMENT_WORKER_HEAP_MB", Default: "256", Purpose: "Soft heap limit of the document extraction worker, 32–4096."},
	{Name: "DOCUMENT_PDF_EXTRACTOR", Default: "auto", Purpose: "PDF text: auto (pdftotext when installed, else built-in), pdftotext (required) or go (built-in only)."},
	{Name: "DOCUMENT_EMBED_ENDPOINT", Default: "gateway", Purpose: "Document embedding endpoint; off disables semantic search."},
	{Name: "DOCUMENT_EMBED_MODEL", Default: "local-embed", Purpose: "Document embedding model."},
	{Name: "DOCUMENT_EMBED_API_KEY", Purpose: "Key for a separate document embedding endpoint.", Secret: true},
	{Name: "DOCUMENT_EMBED_DIM", Purpose: "Expected document embedding dimension."},
	{Name: "WRITE_OP_MAIL_MAX_CONFIRM_ATTEMPTS", Default: "12", Purpose: "Mail write confirmation attempts."},
	{Name: "WRITE_OP_CALENDAR_MAX_CONFIRM_ATTEMPTS", Default: "12", Purpose: "Calendar write confirmation attempts."},
	{Name: "WRITE_OP_STARTED_STALE_MS", Default: "60000", Purpose: "How long a started write must stay unchanged before confirmation treats its caller as crashed (1 s–24 h)."},
	{Name: "MAIL_SEND_MAX_BYTES", Default: "26214400", Purpose: "Largest total of attachments on one sent message (at most 100 MiB)."},
	{Name: "ACTION_CENTER_CALENDAR_DAYS", Default: "3", Purpose: "Calendar reminder lookahead in days (1–60): events starting sooner become Action Center reminders."},
	{Name: "ACTION_CENTER_NOTIFY_MS", Default: "30000", Purpose: "How often serve looks for new Action Center items to announce by Web Push (1 s–1 h)."},
	{Name: "ACTION_CENTER_NO_SEED", Default: "0", Purpose: "Set 1 to have the Action Center's first scan review the last 14 days of mail instead of marking them seen."},
	{Name: "STEWARD_PUSH_CONTACT", Purpose: "VAPID contact URI for Web Push."},
	{Name: "STEWARD_WHISPER_BIN", Purpose: "whisper.cpp binary for transcription."},
	{Name: "STEWARD_WHISPER_MODEL", Purpose: "Whisper model file."},
	{Name: "STEWARD_SPEECH_LANGUAGE", Default: "en", Purpose: "Whisper language code."},
	{Name: "STEWARD_SPEECH_ENABLED", Default: "1", Purpose: "Set 0 to disable transcription."},
	{Name: "STEWARD_WHISPER_TIMEOUT_MS", Default: "120000", Purpose: "Bound on converting plus transcribing one recording (1 s–30 min)."},
	{Name: "STEWARD_SPEECH_MAX_BYTES", Default: "26214400", Purpose: "Largest recording /transcribe accepts (at most 200 MiB)."},
	{Name: "STEWARD_SPEECH_MAX_SECONDS", Default: "300", Purpose: "Longest recording /transcribe accepts, in seconds (at most 3600)."},
	{Name: "STEWARD_VOICE_TRANSPORT", Purpose: "Voice calls: ringback (an external MCP voice server); unset disables calls."},
	{Name: "STEWARD_RINGBACK_LAUNCHER", Purpose: "The program that starts the Ringback MCP server on stdio (docs/voice.md)."},
	{Name: "STEWARD_VOICE_OPENING_LINE", Purpose: "First sentence spoken when a call starts (default per language)."},
	{Name: "STEWARD_VOICE_PREFLIGHT_TIMEOUT_MS", Default: "10000", Purpose: "Bound on the voice server's start, tool listing and status check (at least 1000)."},
	{Name: "STEWARD_VOICE_SETTINGS_FILE", Default: "$STEWARD_HOME/voice-settings.json", Purpose: "Default speech rate and voice per language (managed from the System page)."},
	{Name: "STEWARD_VOICE_CALL_SETTINGS_FILE", Default: "$STEWARD_HOME/voice-call-settings.json", Purpose: "The active call's speech rate (set_call_rate writes it; the voice server reads it)."},
	{Name: "STEWARD_VOICE_EXIT_NODE_ID", Purpose: "Stable Tailscale peer ID of the exit node a call may route through once when the phone network is unreachable; unset disables the fallback."},
	{Name: "STEWARD_VOICE_NETWORK_SETTINGS_FILE", Default: "$STEWARD_HOME/voice-network.json", Purpose: "The call-network fallback's state; its recovery journal sits beside it (.journal)."},
	{Name: "STEWARD_FFMPEG", Default: "ffmpeg from PATH", Purpose: "ffmpeg converting WebM/Ogg/MP4 recordings for whisper.cpp; without it only 16 kHz WAV is accepted."},
	{Name: "VIAGGIATRENO_BASE_URL", Purpose: "ViaggiaTreno endpoint override."},
	{Name: "STEWARD_WIKI_DIR", Default: "$STEWARD_HOME/wiki", Purpose: "The wiki vault (Markdown pages; any Obsidian vault works)."},
	{Name: "WIKI_INDEX_DIR", Default: "$STEWARD_HOME/wiki-index/<vault hash>", Purpose: "The wiki's rebuildable index, ingest queue and write lock."},
	{Name: "WIKI_MODEL", Default: "HOST_TIER", Purpose: "Public model name wiki ingest uses through the gateway."},
	{Name: "WIKI_EMBED_ENDPOINT", Default: "gateway", Purpose: "Wiki page embeddings: gateway, off, or an endpoint URL."},
	{Name: "WIKI_AUTO_INGEST", Default: "1", Purpose: "Queue files that appear in raw/sources/ for ingest; 0 disables."},
	{Name: "WIKI_RESCAN_MS", Default: "300000", Purpose: "Interval of the wiki's full rescan, beside file notifications."},
	{Name: "LLM_WIKI_API_BASE_URL", Default: "http://127.0.0.1:19828", Purpose: "Where the wiki's local HTTP API listens (loopback only)."},
	{Name: "LLM_WIKI_API_TOKEN", Default: "STEWARD_HOME/wiki-api-token", Purpose: "Bearer token of the wiki API.", Secret: true},
	{Name: "WATCH_DB", Default: "$STEWARD_HOME/watches.db", Purpose: "Watch store path."},
	{Name: "WATCH_POLL_MS", Default: "45000", Purpose: "Watch polling interval, at least 15000."},
	{Name: "STEWARD_SCHEDULER", Default: "on", Purpose: "Run the background job scheduler inside steward serve; off disables it (run steward scheduler instead)."},
	{Name: "SCHED_MAIL_RECONCILE_MIN", Default: "10", Purpose: "mail-reconcile interval in minutes (1–1440)."},
	{Name: "SCHED_MAIL_EMBED_MIN", Default: "15", Purpose: "mail-embed interval in minutes (1–1440)."},
	{Name: "SCHED_CALENDAR_SYNC_MIN", Default: "10", Purpose: "calendar-sync interval in minutes (1–1440)."},
	{Name: "SCHED_CONTACTS_INDEX_MIN", Default: "60", Purpose: "contacts-index interval in minutes (1–1440)."},
	{Name: "SCHED_WRITE_OPS_MAIL_MIN", Default: "10", Purpose: "write-ops-mail interval in minutes (1–1440)."},
	{Name: "SCHED_WRITE_OPS_CALENDAR_MIN", Default: "10", Purpose: "write-ops-calendar interval in minutes (1–1440)."},
	{Name: "SCHED_WRITE_OPS_SEND_DUE_MIN", Default: "2", Purpose: "write-ops-send-due interval in minutes (1–1440)."},
	{Name: "SCHED_MAIL_DISTILL_MIN", Default: "15", Purpose: "mail-distill interval in minutes (1–1440)."},
	{Name: "SCHED_ACTION_CENTER_MIN", Default: "10", Purpose: "action-center interval in minutes (1–1440)."},
	{Name: "SCHED_BACKUP_MIN", Default: "1440", Purpose: "backup interval in minutes (1–1440)."},
	{Name: "STEWARD_BACKUP_DIR", Purpose: "Folder of the scheduled daily operational backup; unset: no scheduled backup."},
	{Name: "STEWARD_BACKUP_KEEP", Default: "7", Purpose: "How many scheduled backups to keep (1–365); older ones are removed."},
	{Name: "SCHED_<JOB>_TIMEOUT_MIN", Default: "per job", Purpose: "Per-run timeout of a job in minutes; SCHED_<JOB>_SEC and SCHED_<JOB>_TIMEOUT_SEC give seconds (tests)."},
}

// varPrefixes are families of settings named by pattern, such as the
// scheduler's SCHED_<JOB>_MIN intervals.
var varPrefixes = []struct{ prefix, suffix string }{
	{"SCHED_", "_MIN"},
	{"SCHED_", "_SEC"},
}

// Lookup returns the documented setting called name.
func Lookup(name string) (Var, bool) {
	for _, v := range Vars {
		if v.Name == name {
			return v, true
		}
	}
	for _, p := range varPrefixes {
		if strings.HasPrefix(name, p.prefix) && strings.HasSuffix(name, p.suffix) && len(name) > len(p.prefix)+len(p.suffix) {
			return Var{Name: name}, true
		}
	}
	return Var{}, false
}

// IsSecret reports whether the value of name must never be shown.
func IsSecret(name string) bool {
	if v, ok := Lookup(name); ok && v.Secret {
		return true
	}
	upper := strings.ToUpper(name)
	for _, s := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASS"} {
		if strings.Contains(upper, s) {
			return true
		}
	}
	return false
}
