package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// record traces fn and returns the trace.
func record(t *testing.T, fn func()) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	fn()
	trace.Stop()
	return buf.Bytes()
}

func TestSummarizeCountsFdatasync(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "wal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	const n = 5
	data := record(t, func() {
		for range n {
			if _, err := f.Write([]byte("x")); err != nil {
				t.Error(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				t.Error(err)
			}
		}
	})
	s, err := Summarize(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Fsyncs) != n || len(s.SyncGaps) != n-1 {
		t.Fatalf("%d fdatasync calls and %d gaps, want %d and %d", len(s.Fsyncs), len(s.SyncGaps), n, n-1)
	}
	var total float64
	for _, d := range s.PsRunning {
		total += share(d, s.Duration)
	}
	if total > 100.01 {
		t.Fatalf("Ps running add up to %.2f%% of the trace", total)
	}
	out := s.String()
	for _, want := range []string{"fdatasync: 5 ", "Ps running:", "no P running for 500µs or more:"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestParseWindow(t *testing.T) {
	for _, tc := range []struct {
		in   string
		bins int
		ok   bool
	}{
		{"1000,20,100", 200, true},
		{"0,1,1000", 1, true},
		{"1000,20", 0, false},
		{"1000,0,100", 0, false},
		{"a,20,100", 0, false},
		{"1000,20,0", 0, false},
	} {
		w, err := parseWindow(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("parseWindow(%q): err %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && len(w.rows) != tc.bins {
			t.Errorf("parseWindow(%q): %d bins, want %d", tc.in, len(w.rows), tc.bins)
		}
	}
}

func TestTimeline(t *testing.T) {
	data := record(t, func() {
		done := make(chan struct{})
		go func() { close(done) }()
		<-done
	})
	w, err := parseWindow("0,1000,100000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Summarize(bytes.NewReader(data), w); err != nil {
		t.Fatal(err)
	}
	out := w.String()
	if lines := strings.Count(out, "\n"); lines != 2+10 {
		t.Fatalf("timeline of 10 bins has %d lines:\n%s", lines, out)
	}
}

// TestBlocked: a goroutine that waits for a lock held by the test is
// found in the lock's stack, under its caller, and only there when asked
// for a text of that stack.
func TestBlocked(t *testing.T) {
	var mu sync.Mutex
	data := record(t, func() {
		mu.Lock()
		locked := make(chan struct{})
		done := make(chan struct{})
		go func() {
			close(locked)
			waitForLock(&mu)
			close(done)
		}()
		<-locked
		for !parkedOnLock() {
			runtime.Gosched()
		}
		mu.Unlock()
		<-done
	})
	bs, err := Blocked(bytes.NewReader(data), "waitForLock")
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].N != 1 || bs[0].Total <= 0 || !strings.Contains(bs[0].Stack, "sync.(*Mutex).Lock") {
		t.Fatalf("Blocked(waitForLock) = %+v, want the one wait in Mutex.Lock", bs)
	}
	if bs, _ := Blocked(bytes.NewReader(data), "no such function"); len(bs) != 0 {
		t.Fatalf("Blocked(no such function) = %+v, want nothing", bs)
	}
	if !strings.Contains(bs[0].String(), "n=1 ") {
		t.Errorf("line %q lacks the count", bs[0].String())
	}
}

// parkedOnLock reports whether a goroutine in waitForLock is parked on
// its mutex, as the runtime's stack dump says.
func parkedOnLock() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, "waitForLock") {
			return true
		}
	}
	return false
}

//go:noinline
func waitForLock(mu *sync.Mutex) {
	mu.Lock()
	mu.Unlock()
}
