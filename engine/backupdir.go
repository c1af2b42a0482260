package engine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// pseudoFSRoots are the mount points of kernel pseudo-filesystems: writing a
// backup there fails half-way (or writes to devices), never gives a backup.
var pseudoFSRoots = []string{"/proc", "/sys", "/dev"}

// checkBackupDir applies the rules for a backup target and returns the
// detail message for details.dir, or "". dir must be absolute; after
// resolving symlinks (of the part of the path that exists) it must not be
// inside a pseudo-filesystem nor inside any of dataDirs (the data directory:
// a backup there would be copied into the next backup, survive nothing the
// data does not, and could collide with the store's own files).
func checkBackupDir(dir string, dataDirs ...string) string {
	if dir == "" || !filepath.IsAbs(dir) {
		return "must be an absolute path on the server's machine"
	}
	dir = filepath.Clean(dir)
	real, err := resolveExisting(dir)
	if err != nil {
		return "cannot be resolved: " + err.Error()
	}
	// Both as written and resolved: /proc/self/cwd/x leads out of /proc, but
	// nobody means a backup there.
	for _, root := range pseudoFSRoots {
		if within(dir, root) || within(real, root) {
			return "must not be on a pseudo-filesystem (" + strings.Join(pseudoFSRoots, ", ") + ")"
		}
	}
	if name := pseudoFS(real); name != "" {
		return "must not be on a pseudo-filesystem (" + name + ")"
	}
	for _, d := range dataDirs {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		root, err := resolveExisting(abs)
		if err != nil {
			continue
		}
		if within(real, root) {
			return "must not be inside the data directory (--data " + d + ")"
		}
	}
	return ""
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// the clean absolute path p and appends the components that do not exist yet.
func resolveExisting(p string) (string, error) {
	var rest []string
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = append(rest, filepath.Base(p))
		p = parent
	}
}

// within reports whether p is root or below it (both clean and absolute).
func within(p, root string) bool {
	if p == root || root == string(os.PathSeparator) {
		return true
	}
	return strings.HasPrefix(p, root+string(os.PathSeparator))
}

// existingAncestor is the deepest existing directory on the clean path p.
func existingAncestor(p string) string {
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}
