package event

import (
	"errors"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal: '"' and '\\' escaped, control characters as \u00XX, valid UTF-8 kept as is.
// Invalid UTF-8 becomes \ufffd so the output is always valid JSON, whatever
// a caller hands in.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			if c == '"' || c == '\\' {
				dst = append(dst, '\\', c)
			} else {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

var errNotObject = errors.New("event: properties are not a JSON object")

// TopLevel returns the top-level members of a compact properties object (as produced by the decoder): unescaped name -> raw JSON value text aliasing props.
// Definition checks need random access by name; the hot path uses lookup instead.
func TopLevel(props []byte) (map[string][]byte, error) {
	m := make(map[string][]byte)
	err := eachMember(props, func(key, val []byte) bool {
		m[string(key)] = val
		return true
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Lookup finds the raw JSON text of a top-level member of the object props
// (compact, as stored) without allocating unless the object's keys are
// escaped; found is false when there is no such member or props is not an
// object.
func Lookup(props []byte, name string) (val []byte, found bool) { return lookup(props, name) }

// lookup finds the raw value of a top-level member without allocating
// (unless the object's keys are escaped).
func lookup(props []byte, name string) (val []byte, found bool) {
	eachMember(props, func(key, v []byte) bool {
		if string(key) == name {
			val, found = v, true
			return false
		}
		return true
	})
	return val, found
}

// eachMember calls fn for each top-level member of the JSON object props
// until fn returns false. The text is fully validated on the way.
func eachMember(props []byte, fn func(key, val []byte) bool) error {
	d := decoder{data: props, noDup: true}
	d.ws()
	if d.next() != '{' {
		return errNotObject
	}
	d.pos++
	d.ws()
	if d.next() == '}' {
		d.pos++
		if d.trailing() != nil {
			return errors.New("event: " + d.syntaxMessage())
		}
		return nil
	}
	for {
		key, ok := d.key()
		if !ok || !d.colon() {
			break
		}
		start := d.pos
		if !d.value(2) {
			break
		}
		if !fn(key, props[start:d.pos]) {
			return nil
		}
		d.ws()
		if d.next() == ',' {
			d.pos++
			d.ws()
			continue
		}
		if d.next() == '}' {
			d.pos++
			if d.trailing() != nil {
				break
			}
			return nil
		}
		d.fail(d.pos, errObject)
		break
	}
	if d.errCode == errNone {
		d.fail(d.pos, errMalformed)
	}
	return errors.New("event: " + d.syntaxMessage())
}

// EachMember calls fn for each top-level member of the JSON object props
// (its name unescaped, its raw value text) until fn returns false; the
// enrichment at ingest reads and rewrites properties with it.
func EachMember(props []byte, fn func(key, val []byte) bool) error { return eachMember(props, fn) }

// StringValue is the unescaped content of a raw JSON value when it is a
// string; ok is false for any other JSON type.
func StringValue(v []byte) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	return string(stringValue(v)), true
}
