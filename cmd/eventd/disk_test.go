package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestDiskFlags(t *testing.T) {
	for _, tc := range []struct {
		args, env        []string
		minFree, ballast int64
		bad              bool
	}{
		{minFree: -1, ballast: 256 << 20},
		{args: []string{"--min-free-disk", "512MiB", "--ballast-size", "0"}, minFree: 512 << 20, ballast: 0},
		{args: []string{"--min-free-disk", "1048576"}, minFree: 1 << 20, ballast: 256 << 20},
		{args: []string{"--min-free-disk", "auto"}, minFree: -1, ballast: 256 << 20},
		{env: []string{"EVENTD_MIN_FREE_DISK", "1GiB", "EVENTD_BALLAST_SIZE", "64MiB"}, minFree: 1 << 30, ballast: 64 << 20},
		{env: []string{"EVENTD_MIN_FREE_DISK", "1GiB"}, args: []string{"--min-free-disk", "2GiB"}, minFree: 2 << 30, ballast: 256 << 20},
		{args: []string{"--min-free-disk", "lots"}, bad: true},
		{args: []string{"--ballast-size", "auto"}, bad: true},
		{env: []string{"EVENTD_BALLAST_SIZE", "-5"}, bad: true},
	} {
		for i := 0; i < len(tc.env); i += 2 {
			t.Setenv(tc.env[i], tc.env[i+1])
		}
		var c diskConfig
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.register(fs)
		err := envFlags(fs)
		if err == nil {
			err = fs.Parse(tc.args)
		}
		for i := 0; i < len(tc.env); i += 2 {
			os.Unsetenv(tc.env[i])
		}
		if tc.bad {
			if err == nil {
				t.Errorf("%v %v: want an error", tc.args, tc.env)
			}
			continue
		}
		if err != nil || c.minFreeBytes() != tc.minFree || c.ballast.n != tc.ballast {
			t.Errorf("%v %v: min-free %d, ballast %d, err %v; want %d, %d", tc.args, tc.env, c.minFreeBytes(), c.ballast.n, err, tc.minFree, tc.ballast)
		}
	}
}

func TestOpenRoom(t *testing.T) {
	dir := t.TempDir()
	if got := openRoom(filepath.Join(dir, "missing")); got != 4<<20 {
		t.Errorf("missing dir: %d", got)
	}
	for name, size := range map[string]int{"000002.log": 1000, "MANIFEST-000001": 200, "000005.sst": 5000, "OPTIONS-000003": 30} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := openRoom(dir); got != 4<<20+1200 {
		t.Errorf("openRoom = %d, want WAL + MANIFEST + 4 MiB", got)
	}
}
