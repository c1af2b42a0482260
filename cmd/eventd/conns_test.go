package main

import (
	"flag"
	"testing"
)

func TestDefaultMaxConns(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		want  int
	}{
		{0, 100_000}, // unknown
		{2, 1},
		{512, 128},
		{1024, 256},
		{1 << 20, 100_000},
		{^uint64(0), 100_000}, // RLIM_INFINITY
	} {
		if got := defaultMaxConns(tc.limit); got != tc.want {
			t.Errorf("defaultMaxConns(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// TestConnFlagsFromEnv: the caps are read from EVENTD_MAX_CONNS and
// EVENTD_MAX_CONNS_PER_IP like the other flags, and the command line wins.
func TestConnFlagsFromEnv(t *testing.T) {
	t.Setenv("EVENTD_MAX_CONNS", "300")
	t.Setenv("EVENTD_MAX_CONNS_PER_IP", "7")
	var c connConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.register(fs)
	if err := envFlags(fs); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--max-conns-per-ip", "9"}); err != nil {
		t.Fatal(err)
	}
	if c.maxConns != 300 || c.maxConnsPerIP != 9 {
		t.Fatalf("max-conns %d, max-conns-per-ip %d; want 300 and 9", c.maxConns, c.maxConnsPerIP)
	}
}
