package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eventd/eventd/buildinfo"
)

func TestHealthURL(t *testing.T) {
	tests := []struct {
		listen string
		https  bool
		want   string
	}{
		{"127.0.0.1:8080", false, "http://127.0.0.1:8080/healthz"},
		{"0.0.0.0:8080", false, "http://127.0.0.1:8080/healthz"},
		{":9000", true, "https://127.0.0.1:9000/healthz"},
		{"[::]:8080", false, "http://[::1]:8080/healthz"},
		{"[::1]:8080", false, "http://[::1]:8080/healthz"},
		{"events.example.com:443", true, "https://events.example.com:443/healthz"},
	}
	for _, tc := range tests {
		t.Run(tc.listen, func(t *testing.T) {
			got, err := healthURL(tc.listen, tc.https)
			if err != nil || got != tc.want {
				t.Fatalf("healthURL(%q, %v) = %q, %v; want %q", tc.listen, tc.https, got, err, tc.want)
			}
		})
	}
	if _, err := healthURL("8080", false); err == nil {
		t.Fatal("a listen address without a port was accepted")
	}
}

func TestProbe(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ok     bool
	}{
		{"ok", http.StatusOK, true},
		{"unavailable", http.StatusServiceUnavailable, false},
		{"not found", http.StatusNotFound, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"status":"ok"}`))
			}))
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Cleanup(cancel)
			var out bytes.Buffer
			err := probe(ctx, srv.URL+"/healthz", &out)
			if (err == nil) != tc.ok {
				t.Fatalf("probe: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// HTTPS: the certificate names the public host, not loopback, and is not checked.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(tlsSrv.Close)
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(tcancel)
	if err := probe(tctx, tlsSrv.URL+"/healthz", &bytes.Buffer{}); err != nil {
		t.Fatalf("probe over HTTPS: %v", err)
	}
	// Nothing listening: an error, not a hang.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/healthz"
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if err := probe(ctx, url, &bytes.Buffer{}); err == nil {
		t.Fatal("probe of a closed port succeeded")
	}
}

func TestVersionCmd(t *testing.T) {
	var out bytes.Buffer
	if err := versionCmd(nil, &out); err != nil {
		t.Fatal(err)
	}
	i := buildinfo.Get()
	want := "version: " + i.Version + "\ncommit: " + i.Revision + "\ngo: " + i.GoVersion + "\n"
	if out.String() != want {
		t.Fatalf("version printed %q, want %q", out.String(), want)
	}
	if err := versionCmd([]string{"extra"}, &out); err == nil || !strings.Contains(err.Error(), "no arguments") {
		t.Fatalf("extra argument: %v", err)
	}
}
