package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
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
