package engine

import (
	"strings"
	"testing"
)

func TestNumericHost(t *testing.T) {
	for host, want := range map[string]bool{
		"2130706433":        true,
		"0x7f.1":            true,
		"0177.0.0.1":        true,
		"127.1":             true,
		"0x7f000001":        true,
		"0x":                true,
		"1.2.3.0x4":         true,
		"example.com":       false,
		"hooks.example":     false,
		"1.2.3.4.nip.io":    false, // a DNS name; its address is checked at dial time
		"0xdead.example":    false,
		"10.example":        false,
		"example.0xg":       false,
		"x1":                false,
		"localhost":         false,
		"a-1.example.co.uk": false,
	} {
		if got := numericHost(host); got != want {
			t.Errorf("numericHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestCheckWebhookURL(t *testing.T) {
	const (
		numeric = "numeric forms"
		public  = "only reach public addresses"
		never   = "can never be reached"
	)
	cases := []struct {
		url, env     string
		allowPrivate bool
		want         string // "" accepted, else a part of the message
	}{
		{"https://hooks.example.com/x", Live, false, ""},
		{"https://93.184.216.34/x", Live, false, ""},
		{"https://[2606:4700::1111]/x", Live, false, ""},
		{"http://2130706433/", Live, false, numeric},
		{"http://2130706433/", Test, false, numeric},
		{"http://2130706433/", Live, true, numeric},
		{"http://0x7f.1/", Live, false, numeric},
		{"http://0177.0.0.1/", Test, false, numeric},
		{"http://127.1:8080/", Live, false, numeric},
		{"http://127.0.0.1./", Test, false, ""},
		{"http://[::127.0.0.1]/", Live, false, public}, // IPv4-compatible ::/96
		{"http://[::127.0.0.1]/", Test, false, never},
		{"http://[::ffff:127.0.0.1]/", Live, false, public},
		{"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", Live, false, public}, // Teredo
		{"http://[2002:7f00:1::1]/", Live, false, public},                       // 6to4 of 127.0.0.1
		{"http://192.88.99.1/", Live, false, public},                            // 6to4 relay anycast
		{"http://[64:ff9b::7f00:1]/", Live, false, public},                      // NAT64
		{"http://[fc00::1]/", Live, false, public},
		{"http://[fc00::1]/", Test, false, ""},
		{"http://169.254.169.254/", Test, false, never},
		{"http://169.254.169.254/", Live, true, ""},
		{"http://[::127.0.0.1]/", Live, true, ""}, // the guard is off with the flag
		{"http://localhost/", Live, false, public},
		{"http://localhost/", Test, false, ""},
	}
	for _, c := range cases {
		e := &Engine{cfg: Config{WebhooksAllowPrivate: c.allowPrivate}}
		got := e.checkWebhookURL(c.url, c.env)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s (%s, allow private %v): %q, want %q", c.url, c.env, c.allowPrivate, got, c.want)
		}
	}
}
