package event

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseTime(t *testing.T) {
	ms := func(s string) int64 {
		t.Helper()
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	tests := []struct {
		in       string
		want     int64
		dateOnly bool
		err      error
	}{
		{"2026-01-15T10:30:00Z", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15t10:30:00z", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15 10:30:00Z", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15T10:30:00+02:00", ms("2026-01-15T08:30:00Z"), false, nil},
		{"2026-01-15T10:30:00-05:30", ms("2026-01-15T16:00:00Z"), false, nil},
		{"2026-01-15T10:30:00+0200", ms("2026-01-15T08:30:00Z"), false, nil},
		{"2026-01-15T10:30:00+02", ms("2026-01-15T08:30:00Z"), false, nil},
		{"2026-01-15T10:30:00+00:00", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15T10:30:00-00:00", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15T10:30:00.1Z", ms("2026-01-15T10:30:00.100Z"), false, nil},
		{"2026-01-15T10:30:00.12Z", ms("2026-01-15T10:30:00.120Z"), false, nil},
		{"2026-01-15T10:30:00.123Z", ms("2026-01-15T10:30:00.123Z"), false, nil},
		{"2026-01-15T10:30:00.1234Z", ms("2026-01-15T10:30:00.123Z"), false, nil},
		{"2026-01-15T10:30:00.12345Z", ms("2026-01-15T10:30:00.123Z"), false, nil},
		{"2026-01-15T10:30:00.123456Z", ms("2026-01-15T10:30:00.123Z"), false, nil},
		{"2026-01-15T10:30:00.1234567Z", ms("2026-01-15T10:30:00.123Z"), false, nil},
		{"2026-01-15T10:30:00.12345678Z", ms("2026-01-15T10:30:00.123Z"), false, nil},
		{"2026-01-15T10:30:00.999999999Z", ms("2026-01-15T10:30:00.999Z"), false, nil},
		{"2026-01-15T10:30:00,5Z", ms("2026-01-15T10:30:00.500Z"), false, nil},
		{"2026-01-15T10:30:00.5+01:00", ms("2026-01-15T09:30:00.500Z"), false, nil},
		{"2026-01-15T10:30:00", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15T10:30:00.250", ms("2026-01-15T10:30:00.250Z"), false, nil},
		{"2026-01-15T10:30", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15T10:30Z", ms("2026-01-15T10:30:00Z"), false, nil},
		{"2026-01-15", ms("2026-01-15T00:00:00Z"), true, nil},
		{"2024-02-29", ms("2024-02-29T00:00:00Z"), true, nil},
		{"2000-02-29T00:00:00Z", ms("2000-02-29T00:00:00Z"), false, nil},
		{"1970-01-01T00:00:00Z", 0, false, nil},
		{"1970-01-01", 0, true, nil},
		{"9999-12-31T23:59:59.999Z", maxTimeMs, false, nil},
		{"2026-01-01T00:30:00+01:00", ms("2025-12-31T23:30:00Z"), false, nil},
		// range
		{"1969-12-31T23:59:59.999Z", 0, false, ErrTimeRange},
		{"1970-01-01T00:00:00+00:01", 0, false, ErrTimeRange},
		{"0001-01-01", 0, false, ErrTimeRange},
		{"9999-12-31T23:59:59-00:01", 0, false, ErrTimeRange},
		// garbage
		{"", 0, false, ErrTimeFormat},
		{"now", 0, false, ErrTimeFormat},
		{"2026", 0, false, ErrTimeFormat},
		{"2026-01", 0, false, ErrTimeFormat},
		{"2026-1-15", 0, false, ErrTimeFormat},
		{"20260115", 0, false, ErrTimeFormat},
		{"2026/01/15", 0, false, ErrTimeFormat},
		{"2026-13-01", 0, false, ErrTimeFormat},
		{"2026-00-01", 0, false, ErrTimeFormat},
		{"2026-01-00", 0, false, ErrTimeFormat},
		{"2026-01-32", 0, false, ErrTimeFormat},
		{"2025-02-29", 0, false, ErrTimeFormat},
		{"1900-02-29", 0, false, ErrTimeFormat},
		{"2026-04-31", 0, false, ErrTimeFormat},
		{"2026-01-15T", 0, false, ErrTimeFormat},
		{"2026-01-15T10", 0, false, ErrTimeFormat},
		{"2026-01-15T10:3", 0, false, ErrTimeFormat},
		{"2026-01-15T24:00:00Z", 0, false, ErrTimeFormat},
		{"2026-01-15T10:60:00Z", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:60Z", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00.Z", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00.", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00ZZ", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00 Z", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00+2:00", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00+24:00", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00+02:60", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00+02:", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00+02:0", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00+02:000", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00UTC", 0, false, ErrTimeFormat},
		{"2026-01-15X10:30:00Z", 0, false, ErrTimeFormat},
		{" 2026-01-15", 0, false, ErrTimeFormat},
		{"2026-01-15 ", 0, false, ErrTimeFormat},
		{"+2026-01-15", 0, false, ErrTimeFormat},
		{"２０２６-01-15", 0, false, ErrTimeFormat},
		{"2026-01-15T10:30:00.12a", 0, false, ErrTimeFormat},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, dateOnly, err := ParseTime(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if got != tt.want || dateOnly != tt.dateOnly {
				t.Fatalf("got %d %v, want %d %v", got, dateOnly, tt.want, tt.dateOnly)
			}
			// The []byte path agrees with the string path.
			pt, err := parseTime([]byte(tt.in))
			if err != nil || pt.ms != got {
				t.Fatalf("bytes path: %d %v", pt.ms, err)
			}
		})
	}
}

func TestParseTimeMatchesTimePackage(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		ms := r.Int64N(maxTimeMs + 1)
		s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
		got, _, err := ParseTime(s)
		if err != nil || got != ms {
			t.Fatalf("ParseTime(%s) = %d %v, want %d", s, got, err, ms)
		}
		off := time.FixedZone("", (r.IntN(47)-23)*1800)
		s = time.UnixMilli(ms).In(off).Format(time.RFC3339Nano)
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err = ParseTime(s)
		if wm := want.UnixMilli(); wm < 0 || wm > maxTimeMs || want.Year() > 9999 {
			continue
		}
		if err != nil || got != want.UnixMilli() {
			t.Fatalf("ParseTime(%s) = %d %v, want %d", s, got, err, want.UnixMilli())
		}
	}
}

func TestAppendTime(t *testing.T) {
	tests := []struct {
		ms   int64
		want string
	}{
		{0, "1970-01-01T00:00:00.000Z"},
		{1768473000000, "2026-01-15T10:30:00.000Z"},
		{1768473000007, "2026-01-15T10:30:00.007Z"},
		{1768473000999, "2026-01-15T10:30:00.999Z"},
		{951782400000, "2000-02-29T00:00:00.000Z"},
		{maxTimeMs, "9999-12-31T23:59:59.999Z"},
		{-1, "1969-12-31T23:59:59.999Z"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := string(AppendTime([]byte("x"), tt.ms)); got != "x"+tt.want {
				t.Fatalf("got %s, want x%s", got, tt.want)
			}
		})
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		ms := r.Int64N(maxTimeMs + 1)
		want := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
		got := AppendTime(nil, ms)
		if string(got) != want {
			t.Fatalf("AppendTime(%d) = %s, want %s", ms, got, want)
		}
		back, _, err := ParseTime(string(got))
		if err != nil || back != ms {
			t.Fatalf("round trip %s: %d %v", got, back, err)
		}
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"\x00\x01\n\t\r\x1f", `"\u0000\u0001\u000a\u0009\u000d\u001f"`},
		{"é日本😀", `"é日本😀"`},
		{"</script>\u2028\x7f", "\"</script>\u2028\x7f\""},
		{"bad\xffutf8", `"bad\ufffdutf8"`},
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := AppendString([]byte("["), tt.in)
			if string(got) != "["+tt.want {
				t.Fatalf("got %s, want [%s", got, tt.want)
			}
			if !json.Valid(got[1:]) {
				t.Fatalf("invalid JSON %s", got[1:])
			}
		})
	}
	var all strings.Builder
	for r := rune(0); r < 0x800; r++ {
		all.WriteRune(r)
	}
	all.WriteString("\U0001F600\U0010FFFF\uFFFD")
	inputs := []string{all.String()}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b := make([]rune, rng.IntN(20))
		for i := range b {
			b[i] = rune(rng.IntN(0x110000))
			if b[i] >= 0xD800 && b[i] < 0xE000 {
				b[i] = 'x'
			}
		}
		inputs = append(inputs, string(b))
	}
	for _, s := range inputs {
		if !utf8.ValidString(s) {
			t.Fatal("fixture not UTF-8")
		}
		enc := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil || back != s {
			t.Fatalf("round trip of %q via %s: %q %v", s, enc, back, err)
		}
		// And through this package's own decoder.
		body := `{"event":"a","visitor_id":` + string(enc) + `}`
		if s == "" {
			continue
		}
		in, _, _, p := DecodeSingle([]byte(body))
		if utf8.RuneCountInString(s) <= MaxVisitorLen && (p != nil || in.VisitorID != s) {
			t.Fatalf("decoder round trip of %q: %q %v", s, in.VisitorID, p)
		}
	}
}
