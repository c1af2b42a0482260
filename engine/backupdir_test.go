package engine

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestCheckBackupDir(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	outside := filepath.Join(base, "backups")
	for _, d := range []string{filepath.Join(data, "pebble"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink outside that leads into the data directory, and one inside
	// that leads out of it.
	if err := os.Symlink(data, filepath.Join(base, "sneaky")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(data, "out")); err != nil {
		t.Fatal(err)
	}
	const (
		inside = "must not be inside the data directory"
		pseudo = "must not be on a pseudo-filesystem"
	)
	cases := []struct {
		dir, want string
	}{
		{filepath.Join(outside, "2026-11-24"), ""},
		{filepath.Join(outside, "a", "b", "c"), ""},
		{filepath.Join(base, "data-backup"), ""}, // a sibling whose name starts like the data dir
		{"", "absolute path"},
		{"relative/dir", "absolute path"},
		{data, inside},
		{filepath.Join(data, "bk"), inside},
		{filepath.Join(data, "pebble", "bk"), inside},
		{filepath.Join(outside, "..", "data", "bk"), inside},
		{filepath.Join(base, "sneaky", "bk"), inside},
		{filepath.Join(base, "sneaky"), inside},
		{filepath.Join(data, "out", "bk"), ""}, // resolves outside the data directory
		{"/proc/self/cwd/bk", pseudo},
		{"/proc/bk", pseudo},
		{"/sys/kernel/bk", pseudo},
		{"/dev/shm/bk", pseudo},
		{"/dev", pseudo},
	}
	for _, c := range cases {
		got := checkBackupDir(c.dir, filepath.Join(data, "pebble"), data)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("checkBackupDir(%q) = %q, want %q", c.dir, got, c.want)
		}
	}
	// Relative data directories are resolved against the working directory.
	if got := checkBackupDir(filepath.Join(data, "bk"), "."); got != "" && !strings.Contains(got, inside) {
		t.Errorf("relative data dir: %q", got)
	}
}

func TestPseudoFSByMagic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("statfs magic numbers are Linux-only")
	}
	if got := pseudoFS("/proc/self/status/x/y"); got != "proc" {
		t.Errorf("pseudoFS(/proc/...) = %q, want proc", got)
	}
	if got := pseudoFS("/sys/fs/x"); got == "" {
		t.Errorf("pseudoFS(/sys/fs/x) = %q, want a pseudo-filesystem", got)
	}
	if got := pseudoFS(t.TempDir()); got != "" {
		t.Errorf("pseudoFS(temp dir) = %q", got)
	}
}
