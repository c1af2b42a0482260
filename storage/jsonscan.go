package storage

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// The stored properties are a compact JSON object (the decoder's output).
// The steps below read its top-level members without decoding them: for
// the rollups' numeric sums on every write (eachNumber), and for group-by
// look-ups on reads (lookupMember, rollup_query.go). They never fail: text
// they cannot read ends the walk.

// eachNumber calls fn with the name and value of each top-level numeric
// member of a JSON object, in document order, until fn returns false.
// Members whose name is escaped or longer than MaxRollupPropertyLen are
// skipped. It never fails: text it cannot read ends the walk, so a corrupt
// record costs its rollups, never the write.
func eachNumber(p []byte, fn func(key []byte, v float64) bool) {
	i := skipWS(p, 0)
	if i >= len(p) || p[i] != '{' {
		return
	}
	i++
	for {
		i = skipWS(p, i)
		if i >= len(p) || p[i] != '"' {
			return
		}
		ks := i + 1
		ke, escaped := endString(p, i)
		if ke < 0 {
			return
		}
		key := p[ks : ke-1]
		i = skipWS(p, ke)
		if i >= len(p) || p[i] != ':' {
			return
		}
		i = skipWS(p, i+1)
		vs := i
		if i = endValue(p, i); i < 0 {
			return
		}
		if c := p[vs]; (c == '-' || c >= '0' && c <= '9') && !escaped && len(key) <= MaxRollupPropertyLen {
			if v, ok := parseNumber(p[vs:i]); ok {
				if !fn(key, v) {
					return
				}
			}
		}
		i = skipWS(p, i)
		if i >= len(p) || p[i] != ',' {
			return
		}
		i++
	}
}

// pow10 holds the powers of ten a float64 represents exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseNumber reads a JSON number as strconv.ParseFloat does. A plain
// decimal of at most 15 digits (most properties: prices, counts) is an
// exact integer divided by an exact power of ten, which IEEE division
// rounds correctly; the rest, and anything strconv would refuse, go to
// strconv, whose string conversion allocates.
func parseNumber(b []byte) (float64, bool) {
	i, neg := 0, false
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	var mant uint64
	digits, frac := 0, 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		mant = mant*10 + uint64(b[i]-'0')
		digits++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			mant = mant*10 + uint64(b[i]-'0')
			digits++
			frac++
		}
	}
	if i != len(b) || digits == 0 || digits > 15 {
		v, err := strconv.ParseFloat(string(b), 64)
		return v, err == nil
	}
	v := float64(mant) / pow10[frac]
	if neg {
		v = -v
	}
	return v, true
}

func skipWS(p []byte, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// quoteOrBackslash sets the high bit of each byte of x (little-endian) that
// is a quote or a backslash. A subtraction's borrow can also mark a byte
// above a marked one, never below, so the lowest mark is always real. The
// xors keep each byte's high bit, so one mask with x clears the bytes of
// at least 0x80 (UTF-8) for both terms.
func quoteOrBackslash(x uint64) uint64 {
	q := (x ^ '"'*ones) - ones
	bs := (x ^ '\\'*ones) - ones
	return (q | bs) &^ x & highs
}

// endString returns the index after the closing quote of the string starting
// at p[i] == '"' (-1 if unterminated) and whether it holds an escape. It
// reads eight bytes at a time: strings are most of the properties' bytes.
func endString(p []byte, i int) (int, bool) {
	escaped := false
	for i++; i < len(p); {
		for ; i+8 <= len(p); i += 8 {
			if w := quoteOrBackslash(binary.LittleEndian.Uint64(p[i : i+8 : i+8])); w != 0 {
				i += bits.TrailingZeros64(w) / 8
				break
			}
		}
		if i >= len(p) {
			break
		}
		switch p[i] {
		case '\\':
			escaped = true
			i += 2
		case '"':
			return i + 1, escaped
		default:
			i++
		}
	}
	return -1, escaped
}

// endValue returns the index after the JSON value starting at p[i], -1 if it is cut short.
func endValue(p []byte, i int) int {
	if i >= len(p) {
		return -1
	}
	switch p[i] {
	case '"':
		end, _ := endString(p, i)
		return end
	case '{', '[':
		depth := 0
		for ; i < len(p); i++ {
			switch p[i] {
			case '"':
				end, _ := endString(p, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for ; i < len(p); i++ {
		switch p[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}
