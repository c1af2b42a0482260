package event

import (
	"strings"
	"testing"
)

// TestValidVisitorID is the one visitor_id rule of every route: valid UTF-8
// of 1-256 characters, counted as runes, not bytes.
func TestValidVisitorID(t *testing.T) {
	cases := []struct {
		name string
		v    string
		want bool
	}{
		{"empty", "", false},
		{"one", "v", true},
		{"256 ascii", strings.Repeat("a", 256), true},
		{"257 ascii", strings.Repeat("a", 257), false},
		{"1024 ascii (the old /stream bound)", strings.Repeat("a", 1024), false},
		{"256 two-byte", strings.Repeat("é", 256), true},
		{"257 two-byte", strings.Repeat("é", 257), false},
		{"256 four-byte (1024 bytes)", strings.Repeat("😀", 256), true},
		{"257 four-byte", strings.Repeat("😀", 257), false},
		{"invalid byte", "v\xff", false},
		{"truncated rune", "v\xc3", false},
		{"a real U+FFFD", "\uFFFD", true},
		{"spaces and controls are characters", " \t", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ValidVisitorID(c.v); got != c.want {
				t.Errorf("ValidVisitorID = %v, want %v", got, c.want)
			}
			if got := ValidVisitorIDBytes([]byte(c.v)); got != c.want {
				t.Errorf("ValidVisitorIDBytes = %v, want %v", got, c.want)
			}
		})
	}
}

// The body decoder answers with the shared message.
func TestDecodeVisitorMessage(t *testing.T) {
	if msgVisitor != MsgVisitorID {
		t.Fatalf("decoder message %q differs from MsgVisitorID %q", msgVisitor, MsgVisitorID)
	}
}

func TestValidVisitorIDBytesNoAlloc(t *testing.T) {
	v := []byte(strings.Repeat("é", 200))
	if n := testing.AllocsPerRun(100, func() { ValidVisitorIDBytes(v) }); n != 0 {
		t.Fatalf("%v allocations per call, want 0 (hot path)", n)
	}
}
