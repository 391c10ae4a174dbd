package main

// The System page's diagnostics beyond the host and connector states: each
// check is observational (short timeouts, no connector spawned, no side
// effect) and they run in parallel inside the host's snapshot deadline.

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
	"github.com/agentstack/agentstack/steward/connectors/contacts"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/watch"
)

// connectorToolsJSON is the bundled manifest of Steward's own connectors'
// tools (server → tool names), so that a connector that is down keeps its
// tools listed. TestConnectorToolManifest checks it against the real
// connectors; `go test ./cmd/steward -run TestConnectorToolManifest -update`
// rewrites it.
//
//go:embed connector_tools.json
var connectorToolsJSON []byte

func connectorManifest() map[string][]string {
	m := map[string][]string{}
	if err := json.Unmarshal(connectorToolsJSON, &m); err != nil {
		panic("steward: connector_tools.json: " + err.Error())
	}
	return m
}

// systemDeps is what the diagnostics read.
type systemDeps struct {
	cfg        *config.Config
	env        *cliEnv
	gatewayURL string
	bridge     *mcpbridge.Bridge
	engine     *watch.Engine
	push       *push.Service

	snapshot   sync.Mutex // held while a snapshot is built
	mu         sync.Mutex
	discovered map[string][]string // each server's last live catalog
}

// extend adds the background plane and the diagnostics to a snapshot.
func (bg *background) extend(ctx context.Context, info *host.SystemInfo) {
	if bg == nil {
		return
	}
	d := bg.sys
	// One snapshot at a time: the checks read the shared configuration,
	// whose getters are not safe for concurrent use.
	d.snapshot.Lock()
	defer d.snapshot.Unlock()
	specs, speech := d.storeSpecs(), d.speech()
	var mu sync.Mutex
	var wg sync.WaitGroup
	add := func(s host.ServiceStatus) {
		mu.Lock()
		info.Services = append(info.Services, s)
		mu.Unlock()
	}
	wg.Go(func() { add(d.gatewayModels(ctx)) })
	wg.Go(func() {
		add(host.ProbeHTTP(ctx, nil, "ollama", "http://127.0.0.1:11434/api/version"))
	})
	wg.Go(func() {
		for _, s := range d.sources() {
			add(s)
		}
	})
	wg.Go(func() { add(d.watchStatus(ctx)) })
	stores := checkStores(ctx, specs)
	disk := diskStatus(d.cfg.Home)
	add(speech)
	add(d.pushStatus())
	if bg.watcher != nil {
		add(bg.watcher.status())
	}
	jobs, inProcess, err := bg.schedulerStatus()
	sched := &host.SchedulerInfo{InProcess: inProcess, Log: bg.logPath, Jobs: jobs}
	if err != nil {
		sched.Error = err.Error()
	}
	prep := bg.prep.State()
	info.Tools = append(info.Tools, d.inventory()...)
	wg.Wait()
	sort.SliceStable(info.Services, func(i, j int) bool { return info.Services[i].Name < info.Services[j].Name })
	info.Scheduler, info.Stores, info.Disk, info.Preparation = sched, stores, disk, &prep
}

// inventory lists the tools of connectors that are not ready now: the last
// catalog seen in this process, else the bundled manifest.
func (d *systemDeps) inventory() []host.ToolInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.discovered == nil {
		d.discovered = map[string][]string{}
	}
	live := map[string][]string{}
	for _, t := range d.bridge.Tools() {
		if server, _, ok := mcpbridge.SplitToolName(t.Spec().Name); ok {
			live[server] = append(live[server], t.Spec().Name)
		}
	}
	var out []host.ToolInfo
	manifest := connectorManifest()
	for _, s := range d.bridge.Status() {
		if names, ok := live[s.Name]; ok && s.State == mcpbridge.StateReady {
			d.discovered[s.Name] = names
			continue
		}
		names := d.discovered[s.Name]
		if names == nil {
			for _, tool := range manifest[s.Name] {
				names = append(names, mcpbridge.ToolName(s.Name, tool))
			}
		}
		for _, n := range names {
			out = append(out, host.ToolInfo{Name: n, Source: s.Name})
		}
	}
	return out
}

// gatewayModels lists the gateway's public models and checks that the
// local embedding model is among them.
func (d *systemDeps) gatewayModels(ctx context.Context) host.ServiceStatus {
	s := host.ServiceStatus{Name: "gateway models", State: host.StateError}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.gatewayURL+"/models", nil)
	if key := d.cfg.String("GATEWAY_API_KEY", ""); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.Detail = "model discovery failed: " + d.gatewayURL + " did not answer"
		return s
	}
	defer res.Body.Close()
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&body) != nil {
		s.Detail = "model discovery failed: " + res.Status
		return s
	}
	var ids []string
	embed := false
	for _, m := range body.Data {
		ids = append(ids, m.ID)
		embed = embed || m.ID == "local-embed"
	}
	s.State, s.Detail = host.StateOK, fmt.Sprintf("%d models (%s); local-embed present", len(ids), strings.Join(ids, ", "))
	if !embed {
		s.State, s.Detail = host.StateWarning, fmt.Sprintf("%d models; local-embed missing: search stays keyword-only", len(ids))
	}
	return s
}

func (d *systemDeps) speech() host.ServiceStatus {
	s := host.ServiceStatus{Name: "speech", State: host.StateUnknown, Detail: "not configured (STEWARD_WHISPER_BIN, STEWARD_WHISPER_MODEL)"}
	if !d.cfg.Bool("STEWARD_SPEECH_ENABLED", true) {
		s.Detail = "disabled (STEWARD_SPEECH_ENABLED=0)"
		return s
	}
	bin, model := d.cfg.String("STEWARD_WHISPER_BIN", ""), d.cfg.String("STEWARD_WHISPER_MODEL", "")
	if bin == "" && model == "" {
		return s
	}
	var missing []string
	for _, p := range []string{bin, model} {
		if _, err := os.Stat(p); p == "" || err != nil {
			missing = append(missing, fmt.Sprintf("%q", p))
		}
	}
	if len(missing) > 0 {
		return host.ServiceStatus{Name: "speech", State: host.StateWarning, Detail: "missing: " + strings.Join(missing, ", ")}
	}
	return host.ServiceStatus{Name: "speech", State: host.StateOK, Detail: fmt.Sprintf("whisper %s, model %s, language %s", bin, filepath.Base(model), d.cfg.String("STEWARD_SPEECH_LANGUAGE", "en"))}
}

func (d *systemDeps) watchStatus(ctx context.Context) host.ServiceStatus {
	if d.engine == nil {
		return host.ServiceStatus{Name: "watches", State: host.StateUnknown, Detail: "the watch engine is not running"}
	}
	st := d.engine.Status(ctx)
	s := host.ServiceStatus{Name: "watches", State: host.StateOK}
	detail := fmt.Sprintf("%d active, %d events pending; ", st.Active, st.Pending)
	if st.LastPoll.IsZero() {
		detail += "no poll observed in this process"
	} else {
		detail += "last poll " + st.LastPoll.Format(time.RFC3339)
	}
	if !st.LastDelivery.IsZero() {
		detail += ", last delivery " + st.LastDelivery.Format(time.RFC3339)
	}
	if st.LastError != "" {
		s.State, detail = host.StateWarning, detail+"; last error: "+st.LastError
	}
	s.Detail = detail
	return s
}

func (d *systemDeps) pushStatus() host.ServiceStatus {
	if d.push == nil {
		return host.ServiceStatus{Name: "web push", State: host.StateUnknown, Detail: "not running"}
	}
	n := len(d.push.Subscriptions())
	s := host.ServiceStatus{Name: "web push", State: host.StateOK, Detail: fmt.Sprintf("%d subscription%s; no delivery observed in this process", n, plural(n))}
	if at, rep, ok := d.push.LastReport(); ok {
		s.Detail = fmt.Sprintf("%d subscription%s; last delivery %s: %d of %d delivered, %d pruned", n, plural(n), at.Format(time.RFC3339), rep.Delivered, rep.Attempted, rep.Pruned)
		if !rep.Complete() {
			s.State = host.StateWarning
			s.Detail += "; " + strings.Join(rep.Errors, "; ")
		}
	}
	return s
}

// storeSpec names a primary SQLite store; required ones exist once serve
// has started, the others once their job has run.
type storeSpec struct {
	name, path string
	required   bool
}

func (d *systemDeps) storeSpecs() []storeSpec {
	home := d.cfg.Home
	return []storeSpec{
		{"usage", filepath.Join(home, "usage.db"), true},
		{"audit", filepath.Join(home, "audit.db"), true},
		{"chats", filepath.Join(home, "chats.db"), true},
		{"watches", d.cfg.Path("WATCH_DB", filepath.Join(home, "watches.db")), true},
		{"mail mirror", filepath.Join(home, "mail", "mail.db"), false},
		{"promotion state", promoterStatePath(home), false},
		{"calendar index", d.cfg.Path("CALENDAR_INDEX_DB", filepath.Join(home, "calendar-index.sqlitedb")), false},
		{"contacts index", d.cfg.Path("CONTACTS_INDEX_DB", filepath.Join(home, "contacts-index.sqlitedb")), false},
	}
}

func checkStores(ctx context.Context, specs []storeSpec) []host.StoreStatus {
	out := make([]host.StoreStatus, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Go(func() { out[i] = checkStore(ctx, sp) })
	}
	wg.Wait()
	return out
}

// checkStore tells whether a store can be read (a query on a read-only
// connection) and written (its file and folder are writable).
func checkStore(ctx context.Context, sp storeSpec) host.StoreStatus {
	s := host.StoreStatus{Name: sp.name, Path: sp.path}
	st, err := os.Stat(sp.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !sp.required:
		s.State, s.Detail = host.StateUnknown, "not built yet"
		return s
	case err != nil:
		s.State, s.Detail = host.StateError, "cannot read "+sp.path+": "+permissionHint(err)
		return s
	}
	s.SizeBytes = st.Size()
	if !writable(sp.path, st) {
		s.State, s.Detail = host.StateError, fmt.Sprintf("read-only: %s (mode %04o); Steward cannot record changes", sp.path, st.Mode().Perm())
		return s
	}
	if dir := filepath.Dir(sp.path); !dirWritable(dir) {
		s.State, s.Detail = host.StateError, "its folder "+dir+" is read-only; SQLite cannot write its journal"
		return s
	}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	db, err := sql.Open("sqlite", "file:"+sp.path+"?mode=ro&_pragma=busy_timeout(500)")
	if err == nil {
		defer db.Close()
		var n int
		err = db.QueryRowContext(qctx, "SELECT count(*) FROM sqlite_master").Scan(&n)
	}
	if err != nil {
		s.State, s.Detail = host.StateError, "cannot read "+sp.path+": "+err.Error()
		return s
	}
	s.State, s.Detail = host.StateOK, "readable and writable"
	return s
}

// writable requires both the permission bits and access(2): root passes
// access(2) on any file, yet a store chmod'ed read-only is a mistake to show.
func writable(path string, st os.FileInfo) bool {
	return st.Mode().Perm()&0o200 != 0 && unix.Access(path, unix.W_OK) == nil
}

func dirWritable(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && writable(dir, st)
}

func diskStatus(home string) *host.DiskStatus {
	var fsst unix.Statfs_t
	if err := unix.Statfs(home, &fsst); err != nil {
		return &host.DiskStatus{Path: home, State: host.StateUnknown, Detail: err.Error()}
	}
	free, total := fsst.Bavail*uint64(fsst.Bsize), fsst.Blocks*uint64(fsst.Bsize)
	d := &host.DiskStatus{Path: home, State: host.StateOK, FreeBytes: free, TotalBytes: total,
		Detail: fmt.Sprintf("%.1f GiB free of %.1f GiB", float64(free)/(1<<30), float64(total)/(1<<30))}
	switch {
	case free < 256<<20:
		d.State, d.Detail = host.StateError, d.Detail+": stores may fail to write"
	case free < 2<<30:
		d.State, d.Detail = host.StateWarning, d.Detail+": running low"
	}
	return d
}

// sources checks that the mail, calendar and contacts sources can be read,
// without reading any message or event.
func (d *systemDeps) sources() []host.ServiceStatus {
	var out []host.ServiceStatus
	ms, err := mailSettings(d.env)
	switch {
	case errors.Is(err, mail.ErrNoConfig):
		out = append(out, host.ServiceStatus{Name: "source: mail", State: host.StateUnknown, Detail: "not configured: create mail.yaml (docs/mail.md)"})
	case err != nil:
		out = append(out, host.ServiceStatus{Name: "source: mail", State: host.StateError, Detail: firstLine(err.Error())})
	default:
		var paths []string
		for _, a := range ms.Config.Accounts {
			paths = append(paths, a.Root)
		}
		out = append(out, pathsReadable("source: mail", paths))
	}
	for _, p := range []struct {
		name  string
		paths func() ([]string, error)
	}{
		{"calendar", pimSourcePaths(calendarConnector, d.env, func(c *calendar.Config) (ps []string) {
			for _, s := range c.Sources {
				ps = append(ps, s.Path)
			}
			return ps
		})},
		{"contacts", pimSourcePaths(contactsConnector, d.env, func(c *contacts.Config) (ps []string) {
			for _, s := range c.Sources {
				ps = append(ps, s.Path)
			}
			return ps
		})},
	} {
		paths, err := p.paths()
		switch {
		case errors.Is(err, localsource.ErrNotConfigured):
			out = append(out, host.ServiceStatus{Name: "source: " + p.name, State: host.StateUnknown, Detail: "not configured: create " + p.name + ".yaml (docs/calendar-contacts.md)"})
		case err != nil:
			out = append(out, host.ServiceStatus{Name: "source: " + p.name, State: host.StateError, Detail: firstLine(err.Error())})
		default:
			out = append(out, pathsReadable("source: "+p.name, paths))
		}
	}
	return out
}

func pathsReadable(name string, paths []string) host.ServiceStatus {
	for _, p := range paths {
		f, err := os.Open(p)
		if err == nil {
			f.Close()
			continue
		}
		return host.ServiceStatus{Name: name, State: host.StateError, Detail: "cannot read " + p + ": " + permissionHint(err)}
	}
	return host.ServiceStatus{Name: name, State: host.StateOK, Detail: fmt.Sprintf("%d source%s readable", len(paths), plural(len(paths)))}
}

// permissionHint turns a macOS privacy refusal into what to do about it.
func permissionHint(err error) string {
	if errors.Is(err, fs.ErrPermission) && runtime.GOOS == "darwin" {
		return "permission denied: grant Full Disk Access to the app running Steward (System Settings → Privacy & Security → Full Disk Access)"
	}
	if errors.Is(err, fs.ErrPermission) {
		return "permission denied"
	}
	return err.Error()
}

// pimSourcePaths returns a function listing the source paths of a
// connector's configuration.
func pimSourcePaths[C any](p pimConnector[C], env *cliEnv, paths func(*C) []string) func() ([]string, error) {
	return func() ([]string, error) {
		c, err := p.configOnly(env)
		if err != nil {
			return nil, err
		}
		return paths(c), nil
	}
}

// configOnly loads the connector's configuration without opening its index.
func (p pimConnector[C]) configOnly(env *cliEnv) (*C, error) {
	_, configPath, _, err := p.files(env)
	if err != nil {
		return nil, err
	}
	return p.loadConfig(configPath)
}
