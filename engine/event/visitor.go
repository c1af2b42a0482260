package event

import (
	"encoding/binary"
	"unicode/utf8"
)

// MsgVisitorID is the one answer, in details.visitor_id, for a visitor id
// outside the rule, wherever it arrives: event bodies, batch entries,
// imports, list and analytics filters, /stream (query and subscribe
// message) and the erasure route.
const MsgVisitorID = "must be a string of 1-256 characters"

// ValidVisitorID reports whether v is a visitor id of the contract
// (section 4): valid UTF-8 of 1 to MaxVisitorLen characters (runes).
func ValidVisitorID(v string) bool {
	if len(v) == 0 || len(v) > utf8.UTFMax*MaxVisitorLen {
		return false
	}
	n := 0
	for i, r := range v {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(v[i:]); size == 1 {
				return false // an invalid byte, not a real U+FFFD
			}
		}
		n++
	}
	return n <= MaxVisitorLen
}

// ValidVisitorIDBytes is ValidVisitorID for a []byte, without a copy.
func ValidVisitorIDBytes(v []byte) bool {
	if len(v) == 0 || len(v) > utf8.UTFMax*MaxVisitorLen {
		return false
	}
	// Ids are mostly ASCII: eight bytes at a time while they are, a rune
	// each (3% of decoding a Segment batch, byte by byte).
	i := 0
	for ; i+8 <= len(v) && binary.LittleEndian.Uint64(v[i:i+8:i+8])&highs == 0; i += 8 {
	}
	n := i
	for i < len(v) {
		n++
		if v[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(v[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		i += size
	}
	return n <= MaxVisitorLen
}
