package diskspace

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "512MiB", want: 512 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "1gib", want: 1 << 30},
		{in: "2G", want: 2 << 30},
		{in: "64k", want: 64 << 10},
		{in: "1.5GiB", want: 3 << 29},
		{in: "2GB", want: 2e9},
		{in: "10 MB", want: 10e6},
		{in: "7B", want: 7},
		{in: "", bad: true},
		{in: "MiB", bad: true},
		{in: "-1", bad: true},
		{in: "12XB", bad: true},
		{in: "1.2.3", bad: true},
		{in: "99999999TiB", bad: true},
	} {
		got, err := ParseSize(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 256 << 20: "256MiB", 1 << 30: "1GiB", 1000: "1000", 3 << 10: "3KiB"} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
		if back, err := ParseSize(FormatSize(in)); err != nil || back != in {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", in, back, err)
		}
	}
}

func TestThreshold(t *testing.T) {
	for _, tc := range []struct {
		minFree int64
		total   uint64
		want    uint64
	}{
		{minFree: -1, total: 100 << 30, want: 1 << 30},           // 5% = 5 GiB: the 1 GiB cap wins
		{minFree: -1, total: 4 << 30, want: (4 << 30) / 100 * 5}, // 5% of 4 GiB < 1 GiB
		{minFree: -1, total: 0, want: 0},
		{minFree: 0, total: 100 << 30, want: 0},
		{minFree: 16 << 20, total: 64 << 20, want: 16 << 20},
	} {
		if got := Threshold(tc.minFree, tc.total); got != tc.want {
			t.Errorf("Threshold(%d, %d) = %d, want %d", tc.minFree, tc.total, got, tc.want)
		}
	}
}

// fakeVolume is a statfs that tests set.
type fakeVolume struct {
	mu    sync.Mutex
	u     Usage
	err   error
	calls int
}

func (f *fakeVolume) set(free uint64, err error) {
	f.mu.Lock()
	f.u.Free, f.err = free, err
	f.mu.Unlock()
}

func (f *fakeVolume) stat(string) (Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.u, f.err
}

func TestGuardStates(t *testing.T) {
	vol := &fakeVolume{u: Usage{Total: 100 << 20, Free: 50 << 20}}
	var logs bytes.Buffer
	g := New(Config{Dir: "/data", MinFree: 10 << 20, Stat: vol.stat, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if g.Refusing() || g.Known() {
		t.Fatal("refusing (or known) before the first check")
	}
	steps := []struct {
		free    uint64
		err     error
		refuse  bool
		logLine string // a new log line containing this, or "" for none
	}{
		{free: 50 << 20, refuse: false},
		{free: 10 << 20, refuse: false}, // exactly the threshold is enough
		{free: 10<<20 - 1, refuse: true, logLine: "refusing writes"},
		{free: 1 << 20, refuse: true},                                   // no second line while it stays refused
		{err: errors.New("boom"), refuse: true, logLine: "cannot read"}, // statfs failing keeps the state
		{err: errors.New("boom"), refuse: true},
		{free: 11 << 20, refuse: false, logLine: "accepting writes"},
		{free: 12 << 20, refuse: false},
	}
	for i, s := range steps {
		before := logs.Len()
		vol.set(s.free, s.err)
		if got := g.Check(); got != s.refuse || g.Refusing() != s.refuse {
			t.Fatalf("step %d: Check = %v, Refusing = %v; want %v", i, got, g.Refusing(), s.refuse)
		}
		if g.Known() != (s.err == nil) {
			t.Errorf("step %d: Known = %v with statfs error %v", i, g.Known(), s.err)
		}
		added := logs.String()[before:]
		if s.logLine == "" && strings.Contains(added, "level=WARN") {
			t.Errorf("step %d: unexpected warning %q", i, added)
		}
		if s.logLine != "" && !strings.Contains(added, s.logLine) {
			t.Errorf("step %d: log %q does not contain %q", i, added, s.logLine)
		}
	}
	if n := strings.Count(logs.String(), "refusing writes"); n != 1 {
		t.Errorf("%d refusal lines, want 1 per state change:\n%s", n, logs.String())
	}
	if g.Free() != 12<<20 || g.Threshold() != 10<<20 {
		t.Errorf("Free = %d, Threshold = %d", g.Free(), g.Threshold())
	}
}

func TestGuardDefaultThreshold(t *testing.T) {
	vol := &fakeVolume{u: Usage{Total: 1000 << 20, Free: 49 << 20}} // 5% = 50 MiB
	g := New(Config{Dir: "/data", MinFree: -1, Stat: vol.stat})
	if !g.Check() {
		t.Fatal("49 MiB free of 1000 MiB: want refusing under the 5% default")
	}
	vol.set(51<<20, nil)
	if g.Check() {
		t.Fatal("51 MiB free of 1000 MiB: want accepting")
	}
}

func TestGuardRun(t *testing.T) {
	vol := &fakeVolume{u: Usage{Total: 100, Free: 1}}
	g := New(Config{Dir: "/d", MinFree: 10, Stat: vol.stat})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { g.Run(stop, 1); close(done) }()
	for !g.Refusing() {
		// Run checks every nanosecond-ish tick; wait for it to have looked.
		select {
		case <-done:
			t.Fatal("Run returned")
		default:
		}
	}
	close(stop)
	<-done
}

func TestNilGuard(t *testing.T) {
	var g *Guard
	if g.Refusing() {
		t.Fatal("a nil guard refuses")
	}
}

func TestEnsureBallast(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ballast")
	vol := &fakeVolume{u: Usage{Total: 100 << 20, Free: 40 << 20}}

	if r, err := EnsureBallast(path, 0, 0, vol.stat); r != BallastNone || err != nil {
		t.Fatalf("size 0: %v, %v", r, err)
	}
	// 40 MiB free, 8 MiB ballast, 35 MiB threshold: 32 left is under it.
	if r, err := EnsureBallast(path, 8<<20, 35<<20, vol.stat); r != BallastNoRoom || err != nil {
		t.Fatalf("no room: %v, %v", r, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ballast created without room: %v", err)
	}
	if r, err := EnsureBallast(path, 8<<20, 32<<20, vol.stat); r != BallastCreated || err != nil {
		t.Fatalf("room: %v, %v", r, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != 8<<20 {
		t.Fatalf("ballast: %v, %v", fi, err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left: %v", err)
	}
	// Already there: kept even when the volume is now full.
	vol.set(0, nil)
	if r, err := EnsureBallast(path, 8<<20, 32<<20, vol.stat); r != BallastKept || err != nil {
		t.Fatalf("kept: %v, %v", r, err)
	}
	// Another size: replaced only with room, counting the old file's space.
	vol.set(30<<20, nil)
	if r, err := EnsureBallast(path, 4<<20, 30<<20, vol.stat); r != BallastCreated || err != nil {
		t.Fatalf("resize: %v, %v", r, err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 4<<20 {
		t.Fatalf("resized ballast is %d bytes", fi.Size())
	}
}

func TestWriteZerosAllocates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeZeros(f, 3<<20+5); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if fi, _ := os.Stat(path); fi.Size() != 3<<20+5 {
		t.Fatalf("size %d", fi.Size())
	}
}
