package event

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/eventd/eventd/storage/propnums"
)

// Depth counting, shared by every entry point of this package:
//
// The event object is depth 1. The value of one of its fields (properties,
// or an ignored unknown field) is depth 2 when it is an object or array, its
// children depth 3, and so on. The contract's "nesting deeper than 16"
// applies to the properties value, which is counted as its own first level:
// properties may span MaxDepth = 16 levels (the properties object itself
// plus 15 more nested containers), so the deepest container accepted sits at
// event-relative depth MaxDepth+1 = 17 and a container at depth 18 is refused.
// Batch entries are measured the same way (each entry object is depth 1 again;
// the batch wrapper and its "events" array do not count), so a given event is
// accepted alone exactly when it is accepted inside a batch. Scalars never add
// a level.
const maxNest = MaxDepth + 1

// linearKeys is the object size up to which duplicate keys are found by
// comparing against every earlier key; larger objects switch to a map so a
// hostile body with thousands of keys is not quadratic.
const linearKeys = 16

// decoder is a strict single-pass JSON scanner. It validates syntax, UTF-8,
// surrogate pairs, duplicate keys and depth, without building any tree.
// Syntax problems are fatal (errCode set, false returned); duplicate keys and
// excessive depth are recorded in dupKey/tooDeep and scanning goes on, so the
// caller can blame the field they occur in and keep collecting problems.
type decoder struct {
	data []byte
	pos  int

	// keys[:nkeys] is a stack of the keys of the objects currently open
	// (small objects only), for duplicate detection without allocation. A
	// fixed array, not a slice grown with append: storing a grown slice
	// through the *decoder would move the whole buffer to the heap.
	keys  [32][]byte
	nkeys int
	// prints[i] is keyPrint(keys[i]): a key is compared with bytes only
	// where its print matches (duplicate checks were 7% of decoding a
	// Segment batch comparing every earlier key).
	prints [32]uint64
	// spaces counts the insignificant whitespace skipped so far, so the
	// compact size of a value is known without another pass over it.
	spaces int
	// noDup turns duplicate detection off for re-scans of already validated text.
	noDup bool

	dupKey  []byte // first duplicate key met since the caller last reset it
	hasDup  bool
	tooDeep bool

	// propsAt is where the properties object being scanned starts (its
	// '{'; 0 when none is, since no body starts with it): object notes
	// that object's numeric members in nums, for the commit's rollups
	// (package propnums).
	propsAt int
	nums    propnums.Recorder

	errPos  int
	errCode int
	errByte byte
}

// safe marks bytes that may appear verbatim in a JSON string and need no
// further look: printable ASCII except the quote and the backslash.
var safe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Syntax error codes. The decoder keeps a code, not a message string: escape
// analysis is not field-sensitive, so copying any pointer out of the decoder
// into an error would move the decoder's stack buffers to the heap.
const (
	errNone = iota
	errEOF
	errNonASCII
	errChar
	errLiteral
	errNumber
	errUnterminated
	errUEscape
	errSurrogate
	errEscape
	errControl
	errUTF8
	errKey
	errColon
	errObject
	errArray
	errClose
	errMalformed
	errTrailing
	errRange
)

var syntaxMessages = [...]string{
	errEOF:          "unexpected end of input",
	errNonASCII:     "unexpected non-ASCII byte",
	errChar:         "unexpected character ",
	errLiteral:      "invalid literal",
	errNumber:       "invalid number",
	errUnterminated: "unterminated string",
	errUEscape:      `invalid \u escape`,
	errSurrogate:    `lone surrogate in \u escape`,
	errEscape:       "invalid escape",
	errControl:      "control character in string",
	errUTF8:         "invalid UTF-8",
	errKey:          "expected a string key",
	errColon:        "expected ':' after object key",
	errObject:       "expected ',' or '}' in object",
	errArray:        "expected ',' or ']' in array",
	errClose:        "expected ',' or a closing bracket",
	errMalformed:    "malformed object",
	errTrailing:     "unexpected data after the JSON value",
	errRange:        "number is not a finite float64 value",
}

func (d *decoder) fail(pos int, code int) bool {
	if d.errCode == errNone {
		d.errPos, d.errCode = pos, code
	}
	return false
}

// syntaxMessage renders the fatal error for details.body.
func (d *decoder) syntaxMessage() string {
	msg := syntaxMessages[d.errCode]
	if d.errCode == errRange {
		// Valid JSON text, but not a value eventd can store.
		return "number at byte " + strconv.Itoa(d.errPos) + " " + msg[len("number "):]
	}
	if d.errCode == errChar {
		msg += strconv.QuoteRune(rune(d.errByte))
	}
	return "malformed JSON at byte " + strconv.Itoa(d.errPos) + ": " + msg
}

func (d *decoder) ws() {
	// Compact JSON, what SDKs send, has none: one comparison, inlined,
	// instead of a call and a four-way switch (7% of decoding a Segment
	// batch).
	if d.pos < len(d.data) && d.data[d.pos] > ' ' {
		return
	}
	d.wsRun()
}

// wsRun skips the whitespace at pos.
func (d *decoder) wsRun() {
	i := d.pos
	for i < len(d.data) {
		switch d.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	d.spaces += i - d.pos
	d.pos = i
}

// next returns the byte at pos, or 0 at the end of input (0 is never valid
// outside a string, so callers need no separate bounds check).
func (d *decoder) next() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

func (d *decoder) unexpected() bool {
	if d.pos >= len(d.data) {
		return d.fail(d.pos, errEOF)
	}
	c := d.data[d.pos]
	if c >= utf8.RuneSelf {
		return d.fail(d.pos, errNonASCII)
	}
	d.errByte = c
	return d.fail(d.pos, errChar)
}

// value scans one value; depth is the depth it has if it is a container.
func (d *decoder) value(depth int) bool {
	switch c := d.next(); c {
	case '{', '[':
		if depth > maxNest {
			d.tooDeep = true
			return d.skipDeep()
		}
		if c == '{' {
			return d.object(depth)
		}
		return d.array(depth)
	default:
		return d.scalar()
	}
}

func (d *decoder) scalar() bool {
	switch c := d.next(); c {
	case '"':
		if j := plainEnd(d.data, d.pos+1); j >= 0 {
			d.pos = j + 1
			return true
		}
		_, ok := d.str()
		return ok
	case 't':
		return d.lit("true")
	case 'f':
		return d.lit("false")
	case 'n':
		return d.lit("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.number()
		}
		return d.unexpected()
	}
}

func (d *decoder) lit(s string) bool {
	if len(d.data)-d.pos >= len(s) && string(d.data[d.pos:d.pos+len(s)]) == s {
		d.pos += len(s)
		return true
	}
	return d.fail(d.pos, errLiteral)
}

// number follows the RFC 8259 grammar exactly: no leading zeros, no '+',
// no bare '.', an exponent needs digits. The value must also be a finite
// float64: 1e999 is refused like NaN, because every reader of the stored
// event (the Go client, JavaScript, the analytics sums) would see infinity or
// fail. The range check costs nothing for ordinary numbers: only a number
// whose integer digits plus exponent exceed 308 can overflow, and only that
// rare one is parsed.
func (d *decoder) number() bool {
	data, i := d.data, d.pos
	start := i
	if i < len(data) && data[i] == '-' {
		i++
	}
	intDigits := 0 // digits before the point, 0 for a leading "0"
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		s := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		intDigits = i - s
	default:
		return d.fail(i, errNumber)
	}
	if i < len(data) && data[i] == '.' {
		i++
		s := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == s {
			return d.fail(i, errNumber)
		}
	}
	exp := 0 // a positive exponent, saturated well above the float64 range
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		neg := false
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			neg = data[i] == '-'
			i++
		}
		s := i
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			if !neg && exp < 1<<20 {
				exp = exp*10 + int(data[i]-'0')
			}
			i++
		}
		if i == s {
			return d.fail(i, errNumber)
		}
	}
	// |value| < 10^(intDigits+exp) (10^exp for a leading "0"), and
	// 10^308 < MaxFloat64: below that bound nothing can overflow. A negative
	// exponent only shrinks the value, and underflow to 0 is finite.
	if intDigits+exp > 308 && !finiteFloat(data[start:i]) {
		return d.fail(start, errRange)
	}
	d.pos = i
	return true
}

// finiteFloat reports whether a syntactically valid JSON number rounds to a
// finite float64. It is off the hot path (see number) and may allocate.
func finiteFloat(num []byte) bool {
	_, err := strconv.ParseFloat(string(num), 64)
	return err == nil
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// plainEnd is the index of the closing quote of the string whose content
// starts at i if it has no escapes, control characters or non-ASCII
// bytes, as nearly all keys and ids have, else -1 (str then scans it).
// Inlined, it spares those strings a call of str (5% of decoding's
// instructions).
func plainEnd(data []byte, i int) int {
	if j := safeRun(data, i); j < len(data) && data[j] == '"' {
		return j
	}
	return -1
}

// str scans a string starting at its opening quote and leaves pos after the
// closing quote. escaped reports whether the raw text differs from the value.
func (d *decoder) str() (escaped bool, ok bool) {
	data := d.data
	i := d.pos + 1
	for {
		i = safeRun(data, i)
		if i >= len(data) {
			return false, d.fail(i, errUnterminated)
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				return false, d.fail(i, errUnterminated)
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					return false, d.fail(i, errUEscape)
				}
				switch {
				case r >= 0xD800 && r < 0xDC00:
					if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						if r2, ok := hex4(data, i+8); ok && r2 >= 0xDC00 && r2 < 0xE000 {
							i += 12
							continue
						}
					}
					return false, d.fail(i, errSurrogate)
				case r >= 0xDC00 && r < 0xE000:
					return false, d.fail(i, errSurrogate)
				}
				i += 6
			default:
				return false, d.fail(i, errEscape)
			}
		case c < 0x20:
			return false, d.fail(i, errControl)
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return false, d.fail(i, errUTF8)
			}
			i += size
		}
	}
}

// key scans an object key and returns its unescaped bytes; they alias the
// input unless the key was escaped.
func (d *decoder) key() ([]byte, bool) {
	if d.next() != '"' {
		return nil, d.fail(d.pos, errKey)
	}
	start := d.pos + 1
	if j := plainEnd(d.data, start); j >= 0 {
		d.pos = j + 1
		return d.data[start:j], true
	}
	esc, ok := d.str()
	if !ok {
		return nil, false
	}
	raw := d.data[start : d.pos-1]
	if esc {
		raw = appendUnescaped(nil, raw)
	}
	return raw, true
}

// colon consumes the ':' after a key, with the whitespace around it.
func (d *decoder) colon() bool {
	// Compact JSON, what SDKs send: the colon right after the key and the
	// value right after it, tested with one bounds check.
	if i := d.pos; i+1 < len(d.data) && d.data[i] == ':' && d.data[i+1] > ' ' {
		d.pos = i + 1
		return true
	}
	d.ws()
	if d.next() != ':' {
		return d.fail(d.pos, errColon)
	}
	d.pos++
	d.ws()
	return true
}

// keySet is what one object's duplicate checks keep beside the decoder's
// slots: a 64-bit mask of its keys' prints, so that a key whose bit is
// clear is new without comparing, and the map it moves to when large.
type keySet struct {
	mask uint64
	m    map[string]struct{}
}

// seen records key among the keys of the object whose first key is in slot
// base (or in ks.m once that object uses a map) and reports whether it was
// there. Small objects use the fixed slots, so most bodies check duplicates
// without allocating; an object switches to a map past linearKeys keys, or
// when the slots are used up by the enclosing objects.
func (d *decoder) seen(base int, key []byte, ks *keySet) bool {
	if d.noDup {
		return false
	}
	if ks.m != nil {
		if _, dup := ks.m[string(key)]; dup {
			return true
		}
		ks.m[string(key)] = struct{}{}
		return false
	}
	p := keyPrint(key)
	bit := uint64(1) << (p * 0x9e3779b97f4a7c15 >> 58)
	if ks.mask&bit != 0 {
		for i, kp := range d.prints[base:d.nkeys] {
			if kp == p && bytes.Equal(d.keys[base+i], key) {
				return true
			}
		}
	}
	ks.mask |= bit
	if d.nkeys-base < linearKeys && d.nkeys < len(d.keys) {
		d.keys[d.nkeys], d.prints[d.nkeys] = key, p
		d.nkeys++
		return false
	}
	ks.m = make(map[string]struct{}, 2*linearKeys)
	for _, k := range d.keys[base:d.nkeys] {
		ks.m[string(k)] = struct{}{}
	}
	ks.m[string(key)] = struct{}{}
	d.nkeys = base
	return false
}

// markKind is the duplicate check of an object's known keys, which the
// caller has already told apart by kind: it sets kind's bit in known and
// reports whether it was set. A test instead of seen's print, search and
// slot (a Segment message's known fields were a third of its calls of
// seen); unescaping comes first, so a known key spelled with escapes is
// the same kind. Unknown keys still go through seen.
func markKind(known *uint32, kind int) bool {
	bit := uint32(1) << kind
	dup := *known&bit != 0
	*known |= bit
	return dup
}

// The known fields' kinds fit markKind's mask.
var (
	_ [32 - fCount]struct{}
	_ [32 - sgCount]struct{}
)

// keyPrint packs a key's length and three of its bytes: equal keys have
// equal prints, and most different keys of one object different ones.
func keyPrint(k []byte) uint64 {
	n := len(k)
	if n == 0 {
		return 0
	}
	return uint64(n) | uint64(k[0])<<32 | uint64(k[n/2])<<40 | uint64(k[n-1])<<48
}

func (d *decoder) object(depth int) bool {
	open := d.pos
	props := open == d.propsAt && open != 0
	if props {
		d.nums.Reset()
	}
	d.pos++ // '{'
	d.ws()
	if d.next() == '}' {
		d.pos++
		return true
	}
	base := d.nkeys
	var ks keySet
	for {
		kb := d.pos + 1 // after the key's opening quote
		key, ok := d.key()
		if !ok {
			return false
		}
		ke := d.pos - 1 // its closing quote
		if dup := d.seen(base, key, &ks); dup && !d.hasDup {
			d.hasDup, d.dupKey = true, key
		}
		if !d.colon() {
			return false
		}
		vs := d.pos
		if !d.value(depth + 1) {
			return false
		}
		if props {
			// An escaped key comes back unescaped, shorter than it was
			// sent: the rollups skip those.
			if c := d.data[vs]; (c == '-' || c >= '0' && c <= '9') && len(key) == ke-kb {
				d.nums.Add(kb-open, ke-open, vs-open, d.pos-open)
			}
		}
		d.ws()
		switch d.next() {
		case ',':
			d.pos++
			d.ws()
		case '}':
			d.pos++
			d.nkeys = base
			return true
		default:
			if d.pos >= len(d.data) {
				return d.unexpected()
			}
			return d.fail(d.pos, errObject)
		}
	}
}

func (d *decoder) array(depth int) bool {
	d.pos++ // '['
	d.ws()
	if d.next() == ']' {
		d.pos++
		return true
	}
	for {
		if !d.value(depth + 1) {
			return false
		}
		d.ws()
		switch d.next() {
		case ',':
			d.pos++
			d.ws()
		case ']':
			d.pos++
			return true
		default:
			if d.pos >= len(d.data) {
				return d.unexpected()
			}
			return d.fail(d.pos, errArray)
		}
	}
}

// skipDeep validates a container that is already too deep, iteratively, so a
// body of a million '[' costs a byte stack instead of a million stack frames.
// Duplicate keys are no longer tracked: the value is refused anyway.
func (d *decoder) skipDeep() bool {
	var arr [64]byte
	stack := arr[:0]
	for {
		d.ws()
		opened := false
		switch d.next() {
		case '{':
			d.pos++
			d.ws()
			if d.next() == '}' {
				d.pos++
				break
			}
			stack = append(stack, '}')
			if !d.skipKey() {
				return false
			}
			opened = true
		case '[':
			d.pos++
			d.ws()
			if d.next() == ']' {
				d.pos++
				break
			}
			stack = append(stack, ']')
			opened = true
		default:
			if !d.scalar() {
				return false
			}
		}
		if opened {
			continue
		}
		// A value just ended: close finished containers, stop at the next ','.
		for {
			if len(stack) == 0 {
				return true
			}
			d.ws()
			c, top := d.next(), stack[len(stack)-1]
			if c == top {
				d.pos++
				stack = stack[:len(stack)-1]
				continue
			}
			if c != ',' {
				if d.pos >= len(d.data) {
					return d.unexpected()
				}
				return d.fail(d.pos, errClose)
			}
			d.pos++
			if top == '}' {
				d.ws()
				if !d.skipKey() {
					return false
				}
			}
			break
		}
	}
}

func (d *decoder) skipKey() bool {
	if d.next() != '"' {
		return d.fail(d.pos, errKey)
	}
	if _, ok := d.str(); !ok {
		return false
	}
	return d.colon()
}

// appendUnescaped appends the value of the raw (already validated) string
// content s, resolving escapes and surrogate pairs.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				return append(dst, s[i:]...)
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(s) {
			return dst
		}
		switch e := s[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(s, i+2)
			i += 6
			if r >= 0xD800 && r < 0xDC00 {
				if r2, ok := hex4(s, i+2); ok && s[i] == '\\' && s[i+1] == 'u' && r2 >= 0xDC00 && r2 < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					i += 6
				} else {
					r = utf8.RuneError // unreachable for validated input
				}
			} else if r >= 0xDC00 && r < 0xE000 {
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst
}

// appendCompact appends validated JSON text v without insignificant
// whitespace; string contents are copied byte for byte, escapes included.
func appendCompact(dst, v []byte) []byte {
	inStr := false
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			dst = append(dst, v[start:i]...)
			start = i + 1
		case '"':
			inStr = true
		}
	}
	return append(dst, v[start:]...)
}

// memberEnd steps over what follows an object member: a ',' (more is
// true: another member follows) or the closing '}' (more is false). ok is
// false on anything else, with the syntax error recorded in d.
func (d *decoder) memberEnd() (more, ok bool) {
	if i := d.pos; i+1 < len(d.data) { // compact JSON, as in colon
		switch d.data[i] {
		case ',':
			if d.data[i+1] > ' ' {
				d.pos = i + 1
				return true, true
			}
		case '}':
			d.pos = i + 1
			return false, true
		}
	}
	d.ws()
	switch d.next() {
	case ',':
		d.pos++
		d.ws()
		return true, true
	case '}':
		d.pos++
		return false, true
	}
	if d.pos >= len(d.data) {
		return false, d.unexpected()
	}
	return false, d.fail(d.pos, errObject)
}
