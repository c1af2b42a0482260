// Package event decodes and validates the bodies of POST /events,
// POST /events/batch and the Segment-compatible /v1 routes (segment.go) with a strict hand-written JSON scanner (encoding/json
// accepts duplicate keys and rewrites invalid UTF-8, and allocates too much
// for the ingest hot path), and holds the time and JSON-string helpers that
// every layer must format identically.
package event

import (
	"unicode/utf8"
	"unsafe"
)

// Limits of the public contract (section 4); exported so handlers and docs quote the same numbers.
const (
	MaxNameLen           = 128      // event name length; names are ASCII, so bytes = characters
	MaxVisitorLen        = 256      // visitor_id length in characters (runes), as users count them
	MaxPropertiesSize    = 32 << 10 // compact encoded size, so whitespace a client adds is not billed
	MaxDepth             = 16       // levels the properties value may span (see the counting note in scan.go)
	MaxIdempotencyKeyLen = 255      // idempotency key length in characters, as for the header
	MaxBatch             = 100      // events per batch request
)

// Input is one decoded event, ready to store.
type Input struct {
	Name           string
	VisitorID      string
	HasVisitor     bool
	Properties     []byte // compact JSON object text (whitespace removed, string escapes kept as sent), "{}" when absent; never aliases the request body
	Numbers        []byte // the properties' numeric members (package propnums), nil if not indexed
	Timestamp      int64  // Unix milliseconds (UTC); valid only when HasTimestamp
	HasTimestamp   bool
	IdempotencyKey string // batch entries only ("idempotency_key"); "" when absent
	Hash           uint64 // keyed inputs: ContentHash of Content(), for idempotency conflict detection; sent_at is NOT part of it
	HashedTime     int64  // keyed inputs: Timestamp as sent, which Hash covers (before any sent_at correction)
	ID             string // import lines only: the event id to keep ("" when absent); the caller checks its form
	CreatedAt      int64  // import lines only: the original time of receipt, Unix ms, when HasCreatedAt
	HasCreatedAt   bool
}

// Problem is why a body or an entry was refused, shaped like the error body so handlers copy it as is.
type Problem struct {
	Status  int               // 400 or 422
	Code    string            // "bad_request" or "validation_error"
	Message string            // human summary
	Details map[string]string // field path -> message; dotted paths like "properties.amount"
}

// Entry is one element of a batch: the decoded input, or the problem that rejected it (Input is then zero).
type Entry struct {
	Input   Input
	Problem *Problem
}

const (
	codeBadRequest = "bad_request"
	msgBadRequest  = "Invalid request data"

	msgRequired    = "is required"
	msgString      = "must be a string"
	msgName        = "event name must be alphanumeric with underscores only (1-128 characters)"
	msgNameChars   = "event name must be alphanumeric with underscores only" // the spec's wording, verbatim
	msgVisitor     = MsgVisitorID
	msgObject      = "must be an object"
	msgPropsSize   = "must be at most 32768 bytes (32 KiB) as compact JSON"
	msgTooDeep     = "must not nest deeper than 16 levels"
	msgDupField    = "duplicate key"
	msgTimestamp   = "must be an ISO 8601 timestamp such as 2026-01-15T10:30:00Z"
	msgTimeRange   = "must be between 1970-01-01 and 9999-12-31"
	msgIdemKey     = "must be a string of 1-255 characters"
	msgEvents      = "must be an array of 1 to 100 events"
	msgEntryObject = "each entry of events must be a JSON object"
	msgBodyObject  = "must be a JSON object"
)

func badRequest(details map[string]string) *Problem {
	return &Problem{Status: 400, Code: codeBadRequest, Message: msgBadRequest, Details: details}
}

// bodyProblem refuses the body as a whole (syntax, not a field).
func bodyProblem(msg string) *Problem {
	return badRequest(map[string]string{"body": msg})
}

// addDetail keeps the first message per key: the first problem met is the one to fix first.
func addDetail(m *map[string]string, key, msg string) {
	if *m == nil {
		*m = make(map[string]string, 4)
	}
	if _, ok := (*m)[key]; !ok {
		(*m)[key] = msg
	}
}

// Field kinds of an event object.
const (
	fUnknown = iota
	fEvent
	fVisitor
	fProps
	fTimestamp
	fSentAt
	fIdem
	fID
	fCreatedAt
	fCount
)

var fieldNames = [...]string{fEvent: "event", fVisitor: "visitor_id", fProps: "properties",
	fTimestamp: "timestamp", fSentAt: "sent_at", fIdem: "idempotency_key", fID: "id", fCreatedAt: "created_at"}

// Decoding modes: which top-level fields an event object may carry.
const (
	modeSingle = iota // POST /events: sent_at
	modeEntry         // a batch entry: idempotency_key
	modeImport        // an import line: idempotency_key, id, created_at
)

// fieldOf maps a top-level key to its kind; an entry's own sent_at and a
// single event's idempotency_key are plain unknown fields (ignored), and
// only imports may set id and created_at.
func fieldOf(key []byte, mode int) int {
	entry := mode != modeSingle
	switch string(key) {
	case "event":
		return fEvent
	case "visitor_id":
		return fVisitor
	case "properties":
		return fProps
	case "timestamp":
		return fTimestamp
	case "sent_at":
		if !entry {
			return fSentAt
		}
	case "idempotency_key":
		if entry {
			return fIdem
		}
	case "id":
		if mode == modeImport {
			return fID
		}
	case "created_at":
		if mode == modeImport {
			return fCreatedAt
		}
	}
	return fUnknown
}

// Value states of a known field.
const (
	absent = iota
	present
	wrongType
)

// rawField is where a known field's value lies: string content without the
// quotes, or the whole object text for properties.
type rawField struct {
	state      uint8
	esc        bool
	start, end int
	size       int // compact size, for properties
}

// eventResult is the outcome of one event object.
type eventResult struct {
	in        Input
	sentAt    int64
	hasSentAt bool
	details   map[string]string
}

// decodeEvent decodes the event object at d.pos ('{'). It returns false only
// on a fatal syntax error; field problems go to r.details.
func (d *decoder) decodeEvent(mode int, r *eventResult) bool {
	var f [fCount]rawField
	d.pos++ // '{'
	d.ws()
	base := d.nkeys
	var ks keySet
	var known uint32 // the known fields met, by kind (markKind)
	if d.next() == '}' {
		d.pos++
	} else {
		for {
			key, ok := d.key()
			if !ok || !d.colon() {
				return false
			}
			kind := fieldOf(key, mode)
			dup, name := false, ""
			if kind != fUnknown {
				dup, name = markKind(&known, kind), fieldNames[kind]
			} else {
				dup = d.seen(base, key, &ks)
			}
			start := d.pos
			d.hasDup, d.dupKey, d.tooDeep = false, nil, false
			if dup || kind == fUnknown {
				if !d.value(2) {
					return false
				}
			} else {
				fv := &f[kind]
				switch c := d.next(); {
				case c == '"' && kind != fProps:
					esc := false
					if j := plainEnd(d.data, start+1); j >= 0 {
						d.pos = j + 1
					} else if esc, ok = d.str(); !ok {
						return false
					}
					*fv = rawField{state: present, esc: esc, start: start + 1, end: d.pos - 1}
				case c == '{' && kind == fProps:
					spaces := d.spaces
					d.propsAt = d.pos
					ok := d.value(2)
					d.propsAt = 0
					if !ok {
						return false
					}
					*fv = rawField{state: present, start: start, end: d.pos, size: d.pos - start - (d.spaces - spaces)}
				case c == 'n':
					if !d.lit("null") {
						return false
					}
					*fv = rawField{state: absent}
				default:
					if !d.value(2) {
						return false
					}
					*fv = rawField{state: wrongType}
				}
			}
			if dup || d.hasDup || d.tooDeep {
				if name == "" {
					name = detailKey(key)
				}
				switch {
				case dup:
					addDetail(&r.details, name, msgDupField)
				case d.hasDup:
					addDetail(&r.details, name, "must not contain duplicate key "+quote(d.dupKey))
				default:
					addDetail(&r.details, name, msgTooDeep)
				}
				if kind != fUnknown {
					f[kind].state = wrongType // reported already; do not decode it
				}
			}
			if more, ok := d.memberEnd(); !ok {
				return false
			} else if more {
				continue
			}
			break
		}
	}
	d.nkeys = base
	d.finishEvent(&f, r)
	return true
}

// report records a field problem; addDetail keeps an earlier duplicate or
// depth message for the same field, which is the more precise one.
func (r *eventResult) report(kind int, msg string) {
	addDetail(&r.details, fieldNames[kind], msg)
}

// finishEvent checks the located fields and, when all are fine, builds the Input.
func (d *decoder) finishEvent(f *[fCount]rawField, r *eventResult) {
	data := d.data
	str := func(fv *rawField) []byte {
		if fv.esc {
			return appendUnescaped(nil, data[fv.start:fv.end])
		}
		return data[fv.start:fv.end]
	}

	var name, visitor, idem []byte
	switch fv := &f[fEvent]; fv.state {
	case absent:
		r.report(fEvent, msgRequired)
	case wrongType:
		r.report(fEvent, msgString)
	default:
		name = str(fv)
		if msg := checkName(name); msg != "" {
			r.report(fEvent, msg)
		}
	}
	switch fv := &f[fVisitor]; fv.state {
	case wrongType:
		r.report(fVisitor, msgString)
	case present:
		visitor = str(fv)
		if !ValidVisitorIDBytes(visitor) {
			r.report(fVisitor, msgVisitor)
		}
	}
	var props []byte
	propsLen := f[fProps].size
	switch fv := &f[fProps]; fv.state {
	case wrongType:
		r.report(fProps, msgObject)
	case present:
		props = data[fv.start:fv.end]
		if propsLen > MaxPropertiesSize {
			r.report(fProps, msgPropsSize)
		}
	}
	ts, hasTS := d.timeField(f, fTimestamp, r)
	r.sentAt, r.hasSentAt = d.timeField(f, fSentAt, r)
	createdAt, hasCreatedAt := d.timeField(f, fCreatedAt, r)
	var id []byte
	switch fv := &f[fID]; fv.state {
	case wrongType:
		r.report(fID, msgString)
	case present:
		id = str(fv)
	}
	switch fv := &f[fIdem]; fv.state {
	case wrongType:
		r.report(fIdem, msgString)
	case present:
		idem = str(fv)
		if !idemKeyLenOK(idem) {
			r.report(fIdem, msgIdemKey)
		}
	}
	if r.details != nil {
		return
	}

	// One allocation for the three texts and the properties (it was two):
	// the strings are views of its first bytes, which nothing writes after
	// this; the properties slice starts after them and is capped at its
	// end, so neither writing into it nor appending to it reaches them. It
	// is not pooled for reuse: a stored event's texts and properties stay
	// referenced by the broadcaster, stream subscribers and the webhook
	// outbox after the request has its answer.
	n := len(name) + len(visitor) + len(idem)
	size := n + 2 // "{}"
	// The index of the properties' numbers (propnums) follows them in the
	// same allocation; its offsets are those of the body's object, so
	// only an object sent without whitespace gets one.
	indexed := false
	if props != nil {
		size = n + propsLen
		if indexed = propsLen == len(props); indexed {
			size += d.nums.Len()
		}
	}
	buf := make([]byte, 0, size)
	buf = append(buf, name...)
	buf = append(buf, visitor...)
	buf = append(buf, idem...)
	switch {
	case props == nil:
		buf = append(buf, '{', '}')
	case propsLen == len(props):
		buf = append(buf, props...)
	default:
		buf = appendCompact(buf, props)
	}
	end := len(buf)
	if indexed {
		buf = d.nums.AppendTo(buf, propsLen)
	}
	all := unsafe.String(unsafe.SliceData(buf), n)
	in := &r.in
	in.Name = all[:len(name)]
	in.VisitorID = all[len(name) : len(name)+len(visitor)]
	in.IdempotencyKey = all[len(name)+len(visitor):]
	in.HasVisitor = f[fVisitor].state == present
	in.Timestamp, in.HasTimestamp = ts, hasTS
	if id != nil {
		in.ID = string(id)
	}
	in.CreatedAt, in.HasCreatedAt = createdAt, hasCreatedAt
	in.Properties = buf[n:end:end]
	in.Numbers = nil
	if len(buf) > end {
		in.Numbers = buf[end:]
	}
	if in.IdempotencyKey != "" {
		// Only a keyed write compares contents; a single event's key comes
		// from its header, after decoding (the handler hashes it then).
		in.SetHash()
	}
}

// timeField parses a timestamp-like field, reporting problems under its name.
func (d *decoder) timeField(f *[fCount]rawField, kind int, r *eventResult) (int64, bool) {
	fv := &f[kind]
	switch fv.state {
	case wrongType:
		r.report(kind, msgString)
		return 0, false
	case absent:
		return 0, false
	}
	raw := d.data[fv.start:fv.end]
	if fv.esc {
		raw = appendUnescaped(nil, raw)
	}
	t, err := parseTime(raw)
	switch err {
	case nil:
		return t.ms, true
	case ErrTimeRange:
		r.report(kind, msgTimeRange)
	default:
		r.report(kind, msgTimestamp)
	}
	return 0, false
}

// nameChar marks the bytes allowed in event names.
var nameChar = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
	}
	return t
}()

// checkName returns the details message for an invalid event name, "" if fine.
func checkName[T string | []byte](s T) string {
	if len(s) == 0 || len(s) > MaxNameLen {
		return msgName
	}
	for i := 0; i < len(s); i++ {
		if !nameChar[s[i]] {
			return msgNameChars
		}
	}
	return ""
}

// idemKeyLenOK says an idempotency key has 1 to MaxIdempotencyKeyLen
// characters. A key has at most as many characters as bytes, so only one
// longer than the bound in bytes is counted: a messageId is 20-60 ASCII
// bytes, and counting its runes took 10-23 ns, 1-2% of decoding a Segment
// message.
func idemKeyLenOK(key []byte) bool {
	return len(key) > 0 && (len(key) <= MaxIdempotencyKeyLen || utf8.RuneCount(key) <= MaxIdempotencyKeyLen)
}

// quote renders a key for a message, shortened so a hostile megabyte-long
// key is not echoed back in full.
func quote(b []byte) string {
	const max = 64
	if utf8.RuneCount(b) > max {
		n := 0
		for i := range string(b) {
			if n == max {
				return string(AppendString(nil, string(b[:i]))) + "..."
			}
			n++
		}
	}
	return string(AppendString(nil, string(b)))
}

// detailKey names an ignored top-level field in details: its own name when
// that is a sensible key, else "body".
func detailKey(key []byte) string {
	if len(key) == 0 || len(key) > MaxNameLen {
		return "body"
	}
	return string(key)
}

// DecodeSingle decodes the body of POST /events; sent_at is returned apart because the caller owns receipt time.
func DecodeSingle(body []byte) (in Input, sentAt int64, hasSentAt bool, p *Problem) {
	d := decoder{data: body}
	d.ws()
	if d.next() != '{' {
		return in, 0, false, d.notObject()
	}
	var r eventResult
	if !d.decodeEvent(modeSingle, &r) {
		return in, 0, false, bodyProblem(d.syntaxMessage())
	}
	if p := d.trailing(); p != nil {
		return in, 0, false, p
	}
	if r.details != nil {
		return in, 0, false, badRequest(r.details)
	}
	return r.in, r.sentAt, r.hasSentAt, nil
}

// notObject explains a body that does not start with '{': malformed JSON,
// or valid JSON of another type.
func (d *decoder) notObject() *Problem {
	if d.pos >= len(d.data) {
		return bodyProblem(msgBodyObject + " (the body is empty)")
	}
	if !d.value(1) {
		return bodyProblem(d.syntaxMessage())
	}
	if p := d.trailing(); p != nil {
		return p
	}
	return bodyProblem(msgBodyObject)
}

// trailing refuses anything but whitespace after the top-level value.
func (d *decoder) trailing() *Problem {
	d.ws()
	if d.pos < len(d.data) {
		d.fail(d.pos, errTrailing)
		return bodyProblem(d.syntaxMessage())
	}
	return nil
}

// DecodeBatch decodes the body of POST /events/batch; p != nil refuses the whole body (400 details.events or malformed JSON).
func DecodeBatch(body []byte) (entries []Entry, sentAt int64, hasSentAt bool, p *Problem) {
	return DecodeBatchInto(nil, body)
}

// DecodeBatchInto is DecodeBatch appending the entries to dst[:0], so that
// a caller may reuse one slice for many batches (a batch's 100 entries are
// 16 KB).
func DecodeBatchInto(dst []Entry, body []byte) (entries []Entry, sentAt int64, hasSentAt bool, p *Problem) {
	d := decoder{data: body}
	d.ws()
	if d.next() != '{' {
		return nil, 0, false, d.notObject()
	}
	d.pos++
	d.ws()
	var details map[string]string
	var ks keySet
	var sent rawField
	sawEvents, badEvents := false, false
	if d.next() == '}' {
		d.pos++
	} else {
		for {
			key, ok := d.key()
			if !ok || !d.colon() {
				return nil, 0, false, bodyProblem(d.syntaxMessage())
			}
			dup := d.seen(0, key, &ks)
			d.hasDup, d.dupKey, d.tooDeep = false, nil, false
			start := d.pos
			switch {
			case dup:
				if !d.value(2) {
					return nil, 0, false, bodyProblem(d.syntaxMessage())
				}
				addDetail(&details, detailKey(key), msgDupField)
			case string(key) == "events":
				sawEvents = true
				if d.next() != '[' {
					badEvents = true
					if !d.value(2) {
						return nil, 0, false, bodyProblem(d.syntaxMessage())
					}
					break
				}
				var ok bool
				entries, ok = d.batchEntries(dst)
				if !ok {
					return nil, 0, false, bodyProblem(d.syntaxMessage())
				}
				if len(entries) == 0 || len(entries) > MaxBatch {
					badEvents = true
				}
			case string(key) == "sent_at":
				switch d.next() {
				case '"':
					esc, ok := d.str()
					if !ok {
						return nil, 0, false, bodyProblem(d.syntaxMessage())
					}
					sent = rawField{state: present, esc: esc, start: start + 1, end: d.pos - 1}
				case 'n':
					if !d.lit("null") {
						return nil, 0, false, bodyProblem(d.syntaxMessage())
					}
				default:
					if !d.value(2) {
						return nil, 0, false, bodyProblem(d.syntaxMessage())
					}
					sent.state = wrongType
				}
			default:
				if !d.value(2) {
					return nil, 0, false, bodyProblem(d.syntaxMessage())
				}
				if d.hasDup || d.tooDeep {
					name := detailKey(key)
					if d.hasDup {
						addDetail(&details, name, "must not contain duplicate key "+quote(d.dupKey))
					} else {
						addDetail(&details, name, msgTooDeep)
					}
				}
			}
			more, ok := d.memberEnd()
			if ok && more {
				continue
			}
			if ok {
				break
			}
			return nil, 0, false, bodyProblem(d.syntaxMessage())
		}
	}
	if p := d.trailing(); p != nil {
		return nil, 0, false, p
	}
	if !sawEvents || badEvents {
		addDetail(&details, "events", msgEvents)
	}
	var f [fCount]rawField
	f[fSentAt] = sent
	var r eventResult
	sentAt, hasSentAt = d.timeField(&f, fSentAt, &r)
	for k, v := range r.details {
		addDetail(&details, k, v)
	}
	if details != nil {
		return nil, 0, false, badRequest(details)
	}
	return entries, sentAt, hasSentAt, nil
}

// batchEntries decodes the events array at d.pos ('[') into dst[:0].
// Past MaxBatch entries it only validates the rest, since the batch will
// be refused; the returned slice then has MaxBatch+1 elements so the
// caller can tell.
func (d *decoder) batchEntries(dst []Entry) ([]Entry, bool) {
	d.pos++ // '['
	d.ws()
	if d.next() == ']' {
		d.pos++
		return dst[:0], true
	}
	// Without dst, sized for the body at one entry per 48 bytes, so that a
	// batch of ordinary events is not copied as it grows (growing slices
	// took 9% of the batch scenario's CPU); at most MaxBatch+1 entries.
	entries := dst[:0]
	if cap(entries) == 0 {
		entries = make([]Entry, 0, min(MaxBatch+1, max(8, (len(d.data)-d.pos)/48)))
	}
	for {
		d.hasDup, d.dupKey, d.tooDeep = false, nil, false
		switch {
		case len(entries) > MaxBatch:
			if !d.value(1) {
				return nil, false
			}
		case d.next() == '{':
			var r eventResult
			if !d.decodeEvent(modeEntry, &r) {
				return nil, false
			}
			e := Entry{Input: r.in}
			if r.details != nil {
				e = Entry{Problem: badRequest(r.details)}
			}
			entries = append(entries, e)
		default:
			if !d.value(1) {
				return nil, false
			}
			entries = append(entries, Entry{Problem: badRequest(map[string]string{"event": msgEntryObject})})
		}
		d.ws()
		switch d.next() {
		case ',':
			d.pos++
			d.ws()
		case ']':
			d.pos++
			return entries, true
		default:
			if d.pos >= len(d.data) {
				return nil, d.unexpected()
			}
			return nil, d.fail(d.pos, errArray)
		}
	}
}

// ApplySkew shifts a supplied timestamp by receivedAt - sentAt (Segment/Snowplow clock-skew correction); no-op if !in.HasTimestamp.
// The result is clamped to the range ParseTime accepts, so a wild sent_at
// cannot produce a negative storage key; Validate then refuses far futures.
func ApplySkew(in *Input, receivedAtMs, sentAtMs int64) {
	if !in.HasTimestamp {
		return
	}
	t := in.Timestamp + (receivedAtMs - sentAtMs)
	switch {
	case t < 0:
		t = 0
	case t > maxTimeMs:
		t = maxTimeMs
	}
	in.Timestamp = t
}

// DecodeImport decodes one NDJSON line of an import: an event object that
// may also carry id, created_at (as exported) and idempotency_key.
func DecodeImport(line []byte) (in Input, p *Problem) {
	d := decoder{data: line}
	d.ws()
	if d.next() != '{' {
		return in, d.notObject()
	}
	var r eventResult
	if !d.decodeEvent(modeImport, &r) {
		return in, bodyProblem(d.syntaxMessage())
	}
	if p := d.trailing(); p != nil {
		return in, p
	}
	if r.details != nil {
		return in, badRequest(r.details)
	}
	return r.in, nil
}
