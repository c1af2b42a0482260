package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestFsyncNoop drives the durability floor like a ceiling is driven: every
// POST gets the no-op's answer, and its body is in the log when it does.
func TestFsyncNoop(t *testing.T) {
	dir := t.TempDir()
	srv, err := StartFsyncNoop(FsyncNoopOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	res := runLoopback(t, Config{Target: srv.URL, Conns: 8, Duration: 10 * time.Second, MaxRequests: 500,
		Request: EventRequest("/events", "sk_test_noop", NewTemplate(EventTemplate))})
	if res.Requests != 500 || res.Statuses[201] != 500 || len(res.Errors) != 0 {
		t.Fatalf("requests %d statuses %v errors %v", res.Requests, res.Statuses, res.Errors)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "eventd-bench-fsyncnoop-*", "log"))
	if len(logs) != 1 {
		t.Fatalf("log files %v", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != fsyncNoopLogSize {
		t.Errorf("log is %d bytes, want %d: written over, never grown", len(b), fsyncNoopLogSize)
	}
	if n := bytes.Count(b, []byte(`"event":`)); n != 500 {
		t.Errorf("%d events in the log, want 500", n)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestSyncWriter checks the group writer: concurrent bodies each land
// whole, a write past the end starts over at the beginning, and a write
// after close is refused.
func TestSyncWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	w, err := openSyncWriter(path, 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if err := w.write([]byte("abcdefgh")); err != nil { // 10+8 > 16: from the start
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "abcdefgh89\x00\x00\x00\x00\x00\x00" {
		t.Errorf("log %.64q", b)
	}

	var wg sync.WaitGroup
	for _, c := range "wxyz" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.write([]byte{byte(c), byte(c)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, _ := os.ReadFile(path)
	for _, c := range "wxyz" {
		if !bytes.Contains(b, []byte{byte(c), byte(c)}) {
			t.Errorf("%c%c missing from %.64q", c, c, b)
		}
	}

	w.close()
	if err := w.write([]byte("late")); !errors.Is(err, errWriterClosed) {
		t.Errorf("write after close: %v", err)
	}
}
