package http

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestURIPathAndImportPath(t *testing.T) {
	for _, tc := range []struct {
		uri, path string
		isImport  bool
	}{
		{"/events", "/events", false},
		{"/events/batch?api_key=x", "/events/batch", false},
		{"http://host:8080/events#f", "/events", false},
		{"https://host", "", false},
		{"/admin/v1/projects/proj_1/import?environment=live", "/admin/v1/projects/proj_1/import", true},
		{"/admin/v1/projects//import", "/admin/v1/projects//import", false},
		{"/admin/v1/projects/a/b/import", "/admin/v1/projects/a/b/import", false},
		{"/admin/v1/projects/proj_1/export", "/admin/v1/projects/proj_1/export", false},
	} {
		if got := string(uriPath([]byte(tc.uri))); got != tc.path {
			t.Errorf("uriPath(%q) = %q, want %q", tc.uri, got, tc.path)
		}
		if got := isImportPath([]byte(tc.uri)); got != tc.isImport {
			t.Errorf("isImportPath(%q) = %v", tc.uri, got)
		}
	}
}

func TestReadChunkedAndDrain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		limit int
		err   error
	}{
		{"empty", "", 10, nil},
		{"at the limit", strings.Repeat("a", 10), 10, nil},
		{"over the limit", strings.Repeat("a", 11), 10, errTooLarge},
		{"grows the buffer", strings.Repeat("b", 100_000), 100_000, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte a read: the loop must grow and stop exactly.
			got, err := readChunked(iotest.OneByteReader(strings.NewReader(tc.body)), make([]byte, 0, 3), tc.limit)
			if err != tc.err {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err == nil && !bytes.Equal(got, []byte(tc.body)) {
				t.Fatalf("read %d bytes, want %d", len(got), len(tc.body))
			}
		})
	}
	if !drain(strings.NewReader("12345"), 5) || drain(strings.NewReader("123456"), 5) || drain(strings.NewReader(""), -1) {
		t.Fatal("drain must report whether the body ended within n bytes")
	}
	if _, err := readChunked(iotest.ErrReader(io.ErrUnexpectedEOF), nil, 10); err != io.ErrUnexpectedEOF {
		t.Fatalf("read error %v", err)
	}
}

func TestBodyBudget(t *testing.T) {
	b := &bodyBudget{max: 100}
	if !b.reserve(60) || b.reserve(41) || !b.fits(40) || b.fits(41) {
		t.Fatal("reserve/fits do not respect the bound")
	}
	h := heldBody{budget: b, n: 60}
	h.release()
	if b.inUse.Load() != 0 || !b.reserve(100) {
		t.Fatalf("release left %d in use", b.inUse.Load())
	}
	unbounded := &bodyBudget{max: -1}
	if !unbounded.reserve(1<<40) || !unbounded.fits(1<<40) {
		t.Fatal("a negative max is no bound")
	}
}
