package server

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstack/agentstack/steward/pathguard"
)

// PathGuard is the sensitive-path policy save_attachment asks before it
// writes; *pathguard.Guard implements it. Check returns the canonical path to
// write to, or an error wrapping pathguard.ErrBlocked.
type PathGuard interface {
	Check(path string) (string, error)
}

// systemFolders hold the operating system and installed programs: readable
// (the shared policy allows /etc/hosts) but never a place for a downloaded
// file. /proc, /sys and /dev are blocked by the shared policy already; /var
// and /private are left out because the temporary folders live there.
var systemFolders = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/opt", "/root",
	"/System", "/Library", "/Applications"}

// homeStartupFiles are read or run by shells and desktop sessions at start;
// they are refused even before they exist.
var homeStartupFiles = []string{".config", ".local", ".profile", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
	".zshrc", ".zprofile", ".zshenv", ".zlogin", ".xprofile", ".xinitrc", ".xsession", "Library"}

// NewGuard returns the guard for save_attachment destinations: the shared
// sensitive-path policy for home and dataDir (STEWARD_HOME), extended with
// the places a downloaded file must never land — system folders, ~/Library,
// the shell start-up files and the hidden folders of home present when it is
// built (~/.ssh, ~/.config, ~/.vim …), from which programs read their
// configuration.
func NewGuard(home, dataDir string) *pathguard.Guard {
	var extra []string
	for _, dir := range systemFolders {
		if home == "" || !within(home, dir) { // root's home is /root
			extra = append(extra, dir)
		}
	}
	if home != "" {
		for _, name := range homeStartupFiles {
			extra = append(extra, filepath.Join(home, name))
		}
		entries, _ := os.ReadDir(home) // an unreadable home only loses this extension
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				extra = append(extra, filepath.Join(home, e.Name()))
			}
		}
	}
	return pathguard.New(pathguard.Options{Home: home, DataDir: dataDir, Extra: extra})
}

func within(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
