package localsource

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Folder is one collection of a vdir: its root or one of its direct
// sub-folders, with the item files it holds.
type Folder struct {
	// Path is the folder.
	Path string
	// Name is its base name: the collection's id.
	Name string
	// Files are its item files, sorted.
	Files []string
}

// Vdir lists the collections of a vdir folder, the layout vdirsyncer writes
// (one folder per calendar or address book, one file per item): root itself
// and each direct sub-folder, with their regular files whose extension is one
// of exts (compared case-insensitively). Hidden entries and symbolic links
// are skipped, so a walk never leaves root; folders without such files are
// left out.
func Vdir(root string, exts ...string) ([]Folder, error) {
	var out []Folder
	add := func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		f := Folder{Path: dir, Name: filepath.Base(dir)}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
				continue
			}
			if slices.Contains(exts, strings.ToLower(filepath.Ext(e.Name()))) {
				f.Files = append(f.Files, filepath.Join(dir, e.Name()))
			}
		}
		if len(f.Files) > 0 {
			slices.Sort(f.Files)
			out = append(out, f)
		}
		return nil
	}
	if err := add(root); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			if err := add(filepath.Join(root, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Collections lists the folders of a vdir that a new item can go to: root
// itself when it holds item files (one of exts, compared case-insensitively)
// or has no sub-folders, and each visible direct sub-folder, also an empty
// one (a collection the server has that holds nothing yet).
func Collections(root string, exts ...string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var subs []string
	hasItems := false
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasPrefix(name, "."):
		case e.IsDir():
			subs = append(subs, filepath.Join(root, name))
		case e.Type().IsRegular() && slices.Contains(exts, strings.ToLower(filepath.Ext(name))):
			hasItems = true
		}
	}
	slices.Sort(subs)
	if hasItems || len(subs) == 0 {
		return append([]string{root}, subs...), nil
	}
	return subs, nil
}

// DisplayName is a collection's title: the content of its "displayname"
// file (vdirsyncer's metadata), else the folder's name. The file must be a
// plain file: a FIFO is never read and a link never followed.
func DisplayName(dir string) string {
	name := filepath.Join(dir, "displayname")
	if st, err := os.Lstat(name); err == nil && st.Mode().IsRegular() {
		if b, err := ReadBounded(name, 4096); err == nil {
			if t := strings.TrimSpace(string(b)); t != "" {
				return t
			}
		}
	}
	return filepath.Base(dir)
}
