package event

import (
	"bytes"
	"unicode/utf8"
	"unsafe"
)

// Segment HTTP Tracking API bodies (contract section 12), decoded with the
// same strict scanner as native events: one pass over each message records
// where its known fields lie, unknown fields (channel, version, _metadata,
// writeKey, integrations, ...) are validated as JSON and dropped, and the
// mapped event is built with one allocation per message.

// SegmentType is a Segment message type.
type SegmentType uint8

// The six Segment message types; 0 is no type, so a zero SegmentMessage is typeless.
const (
	SegmentTrack SegmentType = iota + 1
	SegmentPage
	SegmentScreen
	SegmentIdentify
	SegmentGroup
	SegmentAlias
)

// ParseSegmentType maps "track", "page", ... to a SegmentType; 0 for anything else.
func ParseSegmentType(s string) SegmentType { return parseSegmentType(s) }

// parseSegmentType is generic so the decoder parses straight from the body.
// Case-sensitive, as Segment's API is.
func parseSegmentType[T string | []byte](s T) SegmentType {
	switch string(s) {
	case "track":
		return SegmentTrack
	case "page":
		return SegmentPage
	case "screen":
		return SegmentScreen
	case "identify":
		return SegmentIdentify
	case "group":
		return SegmentGroup
	case "alias":
		return SegmentAlias
	}
	return 0
}

// MaxSegmentMessage is Segment's limit on one message (32 KB); a bigger batch element is a rejected entry.
const MaxSegmentMessage = 32 << 10

// MaxSegmentBatch is Segment's limit on a batch body (500 KB); the HTTP layer refuses bigger bodies with 413.
const MaxSegmentBatch = 500 << 10

// SegmentMessage is one Segment message mapped onto an eventd event, or the problem that rejected it.
type SegmentMessage struct {
	// Input is the mapped event: Name, VisitorID (userId, else
	// anonymousId), Properties (compact JSON, never aliasing the body),
	// Timestamp (final: skew applied; HasTimestamp false means receipt
	// time), IdempotencyKey (messageId) and Hash (over the time as sent).
	Input       Input
	Type        SegmentType
	UserID      string // "" when absent; a numeric userId keeps its JSON text
	AnonymousID string // "" when absent
	PreviousID  string // alias only
	// Traits is the compact traits object of identify and group, nil when
	// absent. It shares Input.Properties' memory (it is the $traits value),
	// capped so appending to it cannot write there; neither may be mutated.
	Traits  []byte
	Problem *Problem // non-nil: rejected, the fields above are zero
}

// Field kinds of a Segment message.
const (
	sgUnknown = iota
	sgType
	sgEvent
	sgUserID
	sgAnonID
	sgPrevID
	sgGroupID
	sgProps
	sgTraits
	sgContext
	sgName
	sgCategory
	sgTimestamp
	sgOrigTS
	sgSentAt
	sgMessageID
	sgCount
)

// sgNames are Segment's own field names: details speak the client's language.
var sgNames = [...]string{sgType: "type", sgEvent: "event", sgUserID: "userId", sgAnonID: "anonymousId",
	sgPrevID: "previousId", sgGroupID: "groupId", sgProps: "properties", sgTraits: "traits", sgContext: "context",
	sgName: "name", sgCategory: "category", sgTimestamp: "timestamp", sgOrigTS: "originalTimestamp",
	sgSentAt: "sentAt", sgMessageID: "messageId"}

const (
	msgSegType      = "must be one of track, page, screen, identify, group, alias"
	msgSegIdentity  = "userId or anonymousId is required"
	msgSegElement   = "each element of batch must be a JSON object"
	msgSegBatch     = "must be an array of messages"
	msgSegTooLarge  = "must be at most 32768 bytes"
	codeTooLarge    = "payload_too_large"
	msgTooLargeSumm = "Message exceeds 32 KB"
)

// segFieldOf maps a message key to its kind. Which kinds a type uses is
// decided after the scan (a batch element's "type" may come last); on a
// single route the route is the type, so "type" is an ignored field.
func segFieldOf(key []byte, batch bool) int {
	switch string(key) {
	case "type":
		if batch {
			return sgType
		}
	case "event":
		return sgEvent
	case "userId":
		return sgUserID
	case "anonymousId":
		return sgAnonID
	case "previousId":
		return sgPrevID
	case "groupId":
		return sgGroupID
	case "properties":
		return sgProps
	case "traits":
		return sgTraits
	case "context":
		return sgContext
	case "name":
		return sgName
	case "category":
		return sgCategory
	case "timestamp":
		return sgTimestamp
	case "originalTimestamp":
		return sgOrigTS
	case "sentAt":
		return sgSentAt
	case "messageId":
		return sgMessageID
	}
	return sgUnknown
}

// segObjectDepth is, for fields whose value must be an object, the depth the
// object has in the mapped event's properties: properties is the properties
// object itself (2, as natively); traits and context become members of it
// ($traits, $context), one level down (3), so MaxDepth applies after mapping.
func segObjectDepth(kind int) int {
	switch kind {
	case sgProps:
		return 2
	case sgTraits, sgContext:
		return 3
	}
	return 0
}

// segIDKind reports identifiers, which Segment SDKs sometimes send as numbers.
func segIDKind(kind int) bool {
	return kind == sgUserID || kind == sgAnonID || kind == sgPrevID || kind == sgGroupID
}

// segField is where a known field's value lies in the body: string content
// without quotes (esc: it has escapes), number text (num), or a whole object
// (size: its compact size; deep: it nests too deep, reported only if the
// message's type uses the field).
type segField struct {
	state      uint8
	esc, num   bool
	deep       bool
	start, end int
	size       int
}

// literal is the JSON text of a string or number field as sent (a string
// with its quotes and escapes as sent, which is valid JSON as is).
func (f *segField) literal(data []byte) []byte {
	if f.num {
		return data[f.start:f.end]
	}
	return data[f.start-1 : f.end+1]
}

// text is the field's value: the unescaped string or the number's text.
// It aliases the body unless the string had escapes.
func (f *segField) text(data []byte) []byte {
	if f.esc {
		return appendUnescaped(nil, data[f.start:f.end])
	}
	return data[f.start:f.end]
}

// segScan scans the message object at d.pos ('{'), recording known fields
// in f. It returns false only on a fatal syntax error; duplicate keys go
// to details at once (strict, wherever they are, as for native events).
func (d *decoder) segScan(batch bool, f *[sgCount]segField, details *map[string]string) bool {
	d.pos++ // '{'
	d.ws()
	base := d.nkeys
	if d.next() == '}' {
		d.pos++
		return true
	}
	var m map[string]struct{}
	for {
		key, ok := d.key()
		if !ok || !d.colon() {
			return false
		}
		var dup bool
		m, dup = d.seen(base, key, m)
		kind := segFieldOf(key, batch)
		start := d.pos
		d.hasDup, d.dupKey, d.tooDeep = false, nil, false
		if dup || kind == sgUnknown {
			// Too deep is not a problem here: the value is dropped.
			if !d.value(2) {
				return false
			}
		} else {
			fv := &f[kind]
			c := d.next()
			switch depth := segObjectDepth(kind); {
			case c == '"' && depth == 0:
				esc, ok := d.str()
				if !ok {
					return false
				}
				*fv = segField{state: present, esc: esc, start: start + 1, end: d.pos - 1}
			case c == '{' && depth != 0:
				spaces := d.spaces
				if !d.value(depth) {
					return false
				}
				*fv = segField{state: present, deep: d.tooDeep, start: start, end: d.pos, size: d.pos - start - (d.spaces - spaces)}
			case (c == '-' || (c >= '0' && c <= '9')) && segIDKind(kind):
				if !d.number() {
					return false
				}
				*fv = segField{state: present, num: true, start: start, end: d.pos}
			case c == 'n':
				if !d.lit("null") {
					return false
				}
				*fv = segField{}
			default:
				if !d.value(2) {
					return false
				}
				*fv = segField{state: wrongType}
			}
		}
		if dup || d.hasDup {
			name := detailKey(key)
			if kind != sgUnknown {
				name = sgNames[kind]
			}
			if dup {
				addDetail(details, name, msgDupField)
			} else {
				addDetail(details, name, "must not contain duplicate key "+quote(d.dupKey))
			}
		}
		if more, ok := d.memberEnd(); !ok {
			return false
		} else if more {
			continue
		}
		break
	}
	d.nkeys = base
	return true
}

// segEnv is what a batch envelope lends its messages.
type segEnv struct {
	// ctx is the batch's context object. Segment lets a batch carry one
	// context for all its messages; rather than merging it under each
	// message's own context (two sources of truth per key), a message
	// without a context takes the batch's whole, and one with a context
	// keeps its own.
	ctx       segField
	ctxKnown  bool // the envelope's context was scanned (it may follow "batch")
	sentAt    int64
	hasSentAt bool
	sentKnown bool // the envelope's sentAt was scanned (single routes: no envelope, always known)
}

// segResult is a finished message plus what it still waits for from the envelope.
type segResult struct {
	msg SegmentMessage
	// The message was mapped without an envelope field that was not
	// scanned yet (it follows "batch") but that it would use: the batch's
	// context (it has none of its own) or sentAt (its time is an
	// originalTimestamp without a sentAt of its own). The caller fixes the
	// message up if the envelope turns out to have that field.
	needCtx, needSent bool
}

// The members the mapping adds to properties, in the order they are
// written; a mask of them has bit 1<<mk for each.
const (
	mkName = iota
	mkCategory
	mkTraits
	mkContext
	mkGroupID
	mkPrevID
	mkUserID
	mkAnonID
	mkEventName
	mkCount
)

var mappedKeys = [mkCount]string{`"name":`, `"category":`, `"$traits":`, `"$context":`, `"$group_id":`,
	`"$previous_id":`, `"$user_id":`, `"$anonymous_id":`, `"$event_name":`}

// segEventNames are the event names of the types whose name is fixed.
var segEventNames = [...]string{SegmentPage: "pageview", SegmentScreen: "screen", SegmentIdentify: "identify",
	SegmentGroup: "group", SegmentAlias: "alias"}

// segFinish checks the fields a scan located and, when all are fine, builds
// the mapped message into r. details holds the scan's problems so far.
func segFinish(data []byte, f *[sgCount]segField, typ SegmentType, env *segEnv, receivedAt int64, details map[string]string, r *segResult) {
	report := func(kind int, msg string) { addDetail(&details, sgNames[kind], msg) }
	if f[sgType].state != absent || typ == 0 {
		// A batch element names its type.
		switch fv := &f[sgType]; fv.state {
		case absent:
			report(sgType, msgRequired)
		case wrongType:
			report(sgType, msgSegType)
		default:
			if typ = parseSegmentType(fv.text(data)); typ == 0 {
				report(sgType, msgSegType)
			}
		}
		if typ == 0 {
			r.msg = SegmentMessage{Problem: badRequest(details)}
			return
		}
	}

	// The fields this type uses; the others are ignored like unknown ones.
	var use [sgCount]bool
	for _, k := range [...]int{sgUserID, sgAnonID, sgProps, sgContext, sgTimestamp, sgOrigTS, sgSentAt, sgMessageID} {
		use[k] = true
	}
	switch typ {
	case SegmentTrack:
		use[sgEvent] = true
	case SegmentPage, SegmentScreen:
		use[sgName], use[sgCategory] = true, true
	case SegmentIdentify:
		use[sgTraits] = true
	case SegmentGroup:
		use[sgTraits], use[sgGroupID] = true, true
	case SegmentAlias:
		use[sgPrevID] = true
	}
	for k := range f {
		if !use[k] {
			f[k] = segField{}
		}
	}

	// Event name.
	var nameBuf [MaxNameLen]byte
	var name []byte
	renamed := false
	if typ == SegmentTrack {
		switch fv := &f[sgEvent]; fv.state {
		case present:
			raw := data[fv.start:fv.end]
			if !fv.esc && checkName(raw) == "" && raw[0] != '_' && raw[len(raw)-1] != '_' {
				name = raw // already a native name: the common case, nothing to do
			} else {
				orig := fv.text(data)
				n := normalizeName(&nameBuf, orig)
				name = nameBuf[:n]
				renamed = !bytes.Equal(name, orig)
			}
			if len(name) == 0 {
				report(sgEvent, msgRequired)
			}
		default:
			report(sgEvent, msgRequired)
		}
	}

	// Identifiers; "" counts as absent, as in Segment's SDKs (a falsy id).
	ids := [...]int{sgUserID, sgAnonID, sgPrevID, sgGroupID}
	for _, k := range ids {
		fv := &f[k]
		switch fv.state {
		case wrongType:
			report(k, msgString)
		case present:
			if fv.start == fv.end {
				*fv = segField{}
				continue
			}
			if k != sgGroupID && !ValidVisitorIDBytes(fv.text(data)) {
				report(k, msgVisitor)
			}
		}
	}
	if f[sgUserID].state == absent && f[sgAnonID].state == absent {
		report(sgUserID, msgSegIdentity)
	}
	if typ == SegmentAlias {
		if f[sgUserID].state == absent {
			report(sgUserID, msgRequired)
		}
		if f[sgPrevID].state == absent {
			report(sgPrevID, msgRequired)
		}
	}
	if typ == SegmentGroup && f[sgGroupID].state == absent {
		report(sgGroupID, msgRequired)
	}

	// Objects.
	for _, k := range [...]int{sgProps, sgTraits, sgContext} {
		switch fv := &f[k]; {
		case fv.state == wrongType:
			report(k, msgObject)
		case fv.deep:
			report(k, msgTooDeep)
		}
	}
	for _, k := range [...]int{sgName, sgCategory} {
		if f[k].state == wrongType {
			report(k, msgString)
		}
	}

	// Times.
	ts, hasTS := segTime(data, f, sgTimestamp, &details)
	orig, hasOrig := segTime(data, f, sgOrigTS, &details)
	sentAt, hasSentAt := segTime(data, f, sgSentAt, &details)

	switch fv := &f[sgMessageID]; fv.state {
	case wrongType:
		report(sgMessageID, msgString)
	case present:
		if n := utf8.RuneCount(fv.text(data)); n < 1 || n > MaxIdempotencyKeyLen {
			report(sgMessageID, msgIdemKey)
		}
	}
	if details != nil {
		r.msg = SegmentMessage{Problem: badRequest(details)}
		return
	}

	ctx := &f[sgContext]
	if ctx.state == absent {
		ctx = &env.ctx
		r.needCtx = !env.ctxKnown
	}
	r.needSent = !hasTS && hasOrig && !hasSentAt && !env.sentKnown

	// Which members the mapping adds, and their values.
	var vals [mkCount]*segField
	var mask uint
	add := func(bit int, fv *segField) {
		if fv.state == present {
			mask |= 1 << bit
			vals[bit] = fv
		}
	}
	add(mkName, &f[sgName])
	add(mkCategory, &f[sgCategory])
	add(mkTraits, &f[sgTraits])
	add(mkContext, ctx)
	add(mkGroupID, &f[sgGroupID])
	add(mkPrevID, &f[sgPrevID])
	add(mkUserID, &f[sgUserID])
	add(mkAnonID, &f[sgAnonID])
	if renamed {
		add(mkEventName, &f[sgEvent]) // the name as sent, escapes and all
	}

	// One allocation for the texts and the properties, as finishEvent does.
	texts := [...]*segField{&f[sgUserID], &f[sgAnonID], &f[sgPrevID], &f[sgMessageID]}
	size := len(name) + 2
	for _, fv := range texts {
		size += fv.end - fv.start
	}
	props := &f[sgProps]
	if props.state == present {
		size += props.size
	}
	for bit, fv := range vals {
		if fv == nil {
			continue
		}
		size += len(mappedKeys[bit]) + 1
		switch {
		case fv.size != 0:
			size += fv.size
		default:
			size += fv.end - fv.start + 2
		}
	}
	buf := make([]byte, 0, size)
	if typ == SegmentTrack {
		buf = append(buf, name...)
	}
	var lens [len(texts)]int
	for i, fv := range texts {
		n := len(buf)
		switch {
		case fv.state != present:
		case fv.esc:
			buf = appendUnescaped(buf, data[fv.start:fv.end])
		default:
			buf = append(buf, data[fv.start:fv.end]...)
		}
		lens[i] = len(buf) - n
	}
	nt := len(buf)
	buf = append(buf, '{')
	members := false
	if props.state == present && props.size > 2 {
		raw := data[props.start:props.end]
		if segMayCollide(raw, mask) {
			buf, members = appendMembersExcept(buf, raw, mask)
		} else {
			buf = appendObject(buf, raw[1:], props.size-1)
			buf = buf[:len(buf)-1] // its '}'
			members = true
		}
	}
	traitsAt, traitsEnd := 0, 0
	for bit, fv := range vals {
		if fv == nil {
			continue
		}
		if members {
			buf = append(buf, ',')
		}
		members = true
		buf = append(buf, mappedKeys[bit]...)
		switch {
		case fv.size != 0: // an object
			at := len(buf)
			buf = appendObject(buf, data[fv.start:fv.end], fv.size)
			if bit == mkTraits {
				traitsAt, traitsEnd = at, len(buf)
			}
		case fv.num: // a numeric id, stored as the string it stands for
			buf = append(buf, '"')
			buf = append(buf, data[fv.start:fv.end]...)
			buf = append(buf, '"')
		default:
			buf = append(buf, fv.literal(data)...)
		}
	}
	buf = append(buf, '}')
	if len(buf)-nt > MaxPropertiesSize {
		r.msg = SegmentMessage{Problem: badRequest(map[string]string{"properties": msgPropsSize})}
		return
	}

	all := unsafe.String(unsafe.SliceData(buf), nt)
	m := &r.msg
	m.Type = typ
	in := &m.Input
	at := 0
	if typ == SegmentTrack {
		in.Name = all[:len(name)]
		at = len(name)
	} else {
		in.Name = segEventNames[typ]
	}
	var strs [len(texts)]string
	for i, n := range lens {
		strs[i] = all[at : at+n]
		at += n
	}
	m.UserID, m.AnonymousID, m.PreviousID, in.IdempotencyKey = strs[0], strs[1], strs[2], strs[3]
	in.VisitorID = m.UserID
	if in.VisitorID == "" {
		in.VisitorID = m.AnonymousID
	}
	in.HasVisitor = true
	in.Properties = buf[nt:len(buf):len(buf)]
	if traitsAt != 0 {
		m.Traits = buf[traitsAt:traitsEnd:traitsEnd]
	}

	// The hash sees the time as sent, so a retry with a new sentAt is a
	// replay; then the skew correction gives the final time.
	switch {
	case hasTS:
		in.Timestamp, in.HasTimestamp = ts, true
	case hasOrig:
		in.Timestamp, in.HasTimestamp = orig, true
	}
	in.Hash = contentHash(in)
	if !hasTS && hasOrig {
		switch {
		case hasSentAt:
			ApplySkew(in, receivedAt, sentAt)
		case env.hasSentAt:
			ApplySkew(in, receivedAt, env.sentAt)
		}
	}
}

// appendObject appends validated JSON text v whose compact size is known:
// as is when it has no whitespace to remove (SDKs send compact JSON), which
// is a copy instead of a byte-by-byte pass.
func appendObject(dst, v []byte, size int) []byte {
	if size == len(v) {
		return append(dst, v...)
	}
	return appendCompact(dst, v)
}

// segTime parses a time field, reporting problems under its Segment name.
func segTime(data []byte, f *[sgCount]segField, kind int, details *map[string]string) (int64, bool) {
	fv := &f[kind]
	switch fv.state {
	case wrongType:
		addDetail(details, sgNames[kind], msgString)
		return 0, false
	case absent:
		return 0, false
	}
	t, err := parseTime(fv.text(data))
	switch err {
	case nil:
		return t.ms, true
	case ErrTimeRange:
		addDetail(details, sgNames[kind], msgTimeRange)
	default:
		addDetail(details, sgNames[kind], msgTimestamp)
	}
	return 0, false
}

// normalizeName maps a Segment event name onto the native rule: every run of
// characters outside [A-Za-z0-9_] becomes one '_', leading and trailing '_'
// are trimmed, and the result is cut to MaxNameLen bytes. It works in one
// pass: underscores wait in pend until a letter or digit follows, so
// trailing ones are never written and leading ones are dropped.
func normalizeName(out *[MaxNameLen]byte, s []byte) int {
	n, pend := 0, 0
	run := false // inside a run of characters outside the set
	for i := 0; i < len(s) && n < MaxNameLen; {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRune(s[i:])
			i += size
		}
		if !nameChar[c] { // every byte >= 0x80 is outside: a multi-byte character is one
			if !run {
				pend++
				run = true
			}
			continue
		}
		run = false
		if c == '_' {
			pend++
			continue
		}
		if n > 0 {
			for ; pend > 0 && n < MaxNameLen; pend-- {
				out[n] = '_'
				n++
			}
		}
		pend = 0
		if n < MaxNameLen {
			out[n] = c
			n++
		}
	}
	return n
}

// segMayCollide reports whether the properties object might have a
// top-level key the mapping writes (mask), by a conservative look at its
// text: mapped keys start with '$' except name and category, and a key can
// only spell them differently with a \u escape. False is certain, so the
// object is copied whole; true costs a member-by-member copy.
func segMayCollide(obj []byte, mask uint) bool {
	if bytes.Contains(obj, []byte(`\u`)) {
		return true
	}
	if mask&^(1<<mkName|1<<mkCategory) != 0 && bytes.Contains(obj, []byte(`"$`)) {
		return true
	}
	return (mask&(1<<mkName) != 0 && bytes.Contains(obj, []byte(`"name"`))) ||
		(mask&(1<<mkCategory) != 0 && bytes.Contains(obj, []byte(`"category"`)))
}

// appendMembersExcept appends the members of a validated object, compact and
// comma-separated, leaving out those whose key the mapping writes itself, so
// the mapped value replaces the sent one instead of duplicating the key.
func appendMembersExcept(dst, obj []byte, mask uint) ([]byte, bool) {
	d := decoder{data: obj, noDup: true, pos: 1}
	d.ws()
	members := false
	for d.next() == '"' {
		ks := d.pos
		key, _ := d.key()
		ke := d.pos
		d.colon()
		vs := d.pos
		d.value(2)
		if !segMapped(key, mask) {
			if members {
				dst = append(dst, ',')
			}
			members = true
			dst = append(dst, obj[ks:ke]...)
			dst = append(dst, ':')
			dst = appendCompact(dst, obj[vs:d.pos])
		}
		d.ws()
		if d.next() != ',' {
			break
		}
		d.pos++
		d.ws()
	}
	return dst, members
}

// segMapped reports whether key is one the mapping writes (per mask).
func segMapped(key []byte, mask uint) bool {
	for bit, k := range mappedKeys {
		if mask&(1<<bit) != 0 && string(key) == k[1:len(k)-2] {
			return true
		}
	}
	return false
}

// DecodeSegmentMessage decodes the body of a single route (/v1/track, /v1/page, ...): typ is the route's type.
// A body that is not a JSON object or is malformed is p (400); a problem
// of the message itself (a missing event, a bad id) is m.Problem, which the
// HTTP layer answers with 400 too. A "type" field in the body is ignored:
// the route decides. The size limit is the HTTP layer's (413 before this).
func DecodeSegmentMessage(body []byte, typ SegmentType, receivedAtMs int64) (m SegmentMessage, p *Problem) {
	d := decoder{data: body}
	d.ws()
	if d.next() != '{' {
		return m, d.notObject()
	}
	var f [sgCount]segField
	var details map[string]string
	if !d.segScan(false, &f, &details) {
		return m, bodyProblem(d.syntaxMessage())
	}
	if p := d.trailing(); p != nil {
		return m, p
	}
	if typ == 0 || typ > SegmentAlias {
		return SegmentMessage{Problem: badRequest(map[string]string{"type": msgSegType})}, nil
	}
	env := segEnv{ctxKnown: true, sentKnown: true}
	var r segResult
	segFinish(body, &f, typ, &env, receivedAtMs, details, &r)
	return r.msg, nil
}

// DecodeSegmentBatch decodes /v1/batch and /v1/import: {"batch":[...], "sentAt":..., "context":{...}, ...}.
// p != nil refuses the whole body (not JSON, not an object, no "batch"
// array, or a bad envelope field: sentAt, context, duplicate keys).
// Otherwise there is one SegmentMessage per element, in order, each
// possibly with its own Problem; an empty batch is no messages.
func DecodeSegmentBatch(body []byte, receivedAtMs int64) (msgs []SegmentMessage, p *Problem) {
	d := decoder{data: body}
	d.ws()
	if d.next() != '{' {
		return nil, d.notObject()
	}
	d.pos++
	d.ws()
	var details map[string]string
	var m map[string]struct{}
	var env segEnv
	var pending []segPending
	sawBatch, badBatch := false, false
	if d.next() == '}' {
		d.pos++
	} else {
		for {
			key, ok := d.key()
			if !ok || !d.colon() {
				return nil, bodyProblem(d.syntaxMessage())
			}
			var dup bool
			m, dup = d.seen(0, key, m)
			d.hasDup, d.dupKey, d.tooDeep = false, nil, false
			start := d.pos
			c := d.next()
			switch {
			case dup:
				if !d.value(2) {
					return nil, bodyProblem(d.syntaxMessage())
				}
				addDetail(&details, detailKey(key), msgDupField)
			case string(key) == "batch":
				sawBatch = true
				if c != '[' {
					badBatch = true
					if !d.value(2) {
						return nil, bodyProblem(d.syntaxMessage())
					}
					break
				}
				if msgs, pending, ok = d.segBatch(&env, receivedAtMs); !ok {
					return nil, bodyProblem(d.syntaxMessage())
				}
			case string(key) == "context" && c == '{':
				spaces := d.spaces
				if !d.value(3) { // becomes $context, a member of properties, as a message's context
					return nil, bodyProblem(d.syntaxMessage())
				}
				env.ctx = segField{state: present, start: start, end: d.pos, size: d.pos - start - (d.spaces - spaces)}
				if d.tooDeep {
					addDetail(&details, "context", msgTooDeep)
				}
			case string(key) == "sentAt" && c == '"':
				esc, ok := d.str()
				if !ok {
					return nil, bodyProblem(d.syntaxMessage())
				}
				// Parsed now: messages after it use it at once.
				var f [sgCount]segField
				f[sgSentAt] = segField{state: present, esc: esc, start: start + 1, end: d.pos - 1}
				env.sentAt, env.hasSentAt = segTime(body, &f, sgSentAt, &details)
			default:
				if c == 'n' && (string(key) == "context" || string(key) == "sentAt") {
					if !d.lit("null") {
						return nil, bodyProblem(d.syntaxMessage())
					}
					break
				}
				if !d.value(2) {
					return nil, bodyProblem(d.syntaxMessage())
				}
				switch string(key) {
				case "context":
					addDetail(&details, "context", msgObject)
				case "sentAt":
					addDetail(&details, "sentAt", msgString)
				}
			}
			if d.hasDup {
				addDetail(&details, detailKey(key), "must not contain duplicate key "+quote(d.dupKey))
			}
			switch string(key) {
			case "context":
				env.ctxKnown = true
			case "sentAt":
				env.sentKnown = true
			}
			more, ok := d.memberEnd()
			if ok && more {
				continue
			}
			if ok {
				break
			}
			return nil, bodyProblem(d.syntaxMessage())
		}
	}
	if p := d.trailing(); p != nil {
		return nil, p
	}
	switch {
	case !sawBatch:
		addDetail(&details, "batch", msgRequired)
	case badBatch:
		addDetail(&details, "batch", msgSegBatch)
	}
	if details != nil {
		return nil, badRequest(details)
	}

	// Messages mapped before an envelope field they use was scanned: a
	// context is written into their properties (and hash), so they are
	// decoded again; a sentAt only shifts their time.
	env.ctxKnown, env.sentKnown = true, true
	for _, pm := range pending {
		switch {
		case pm.needCtx && env.ctx.state == present:
			d := decoder{data: body, pos: pm.start}
			var f [sgCount]segField
			var details map[string]string
			d.segScan(true, &f, &details) // succeeds: it did the first time
			var r segResult
			segFinish(body, &f, 0, &env, receivedAtMs, details, &r)
			msgs[pm.index] = r.msg
		case pm.needSent && env.hasSentAt:
			ApplySkew(&msgs[pm.index].Input, receivedAtMs, env.sentAt)
		}
	}
	if msgs == nil {
		msgs = []SegmentMessage{}
	}
	return msgs, nil
}

// segPending is a message that may need an envelope field scanned after it.
type segPending struct {
	index, start      int // in msgs; offset of its '{' in the body
	needCtx, needSent bool
}

// segBatch decodes the batch array at d.pos ('['). Messages mapped without
// an envelope field not yet scanned are listed in pending for the caller.
func (d *decoder) segBatch(env *segEnv, receivedAt int64) (msgs []SegmentMessage, pending []segPending, ok bool) {
	d.pos++ // '['
	d.ws()
	if d.next() == ']' {
		d.pos++
		return nil, nil, true
	}
	msgs = make([]SegmentMessage, 0, 16)
	for {
		d.hasDup, d.dupKey, d.tooDeep = false, nil, false
		if d.next() == '{' {
			start := d.pos
			var f [sgCount]segField
			var details map[string]string
			if !d.segScan(true, &f, &details) {
				return nil, nil, false
			}
			var r segResult
			if d.pos-start > MaxSegmentMessage {
				r.msg.Problem = &Problem{Status: 413, Code: codeTooLarge, Message: msgTooLargeSumm,
					Details: map[string]string{"message": msgSegTooLarge}}
			} else {
				segFinish(d.data, &f, 0, env, receivedAt, details, &r)
				if r.msg.Problem == nil && (r.needCtx || r.needSent) {
					pending = append(pending, segPending{len(msgs), start, r.needCtx, r.needSent})
				}
			}
			msgs = append(msgs, r.msg)
		} else {
			if !d.value(1) {
				return nil, nil, false
			}
			msgs = append(msgs, SegmentMessage{Problem: badRequest(map[string]string{"message": msgSegElement})})
		}
		d.ws()
		switch d.next() {
		case ',':
			d.pos++
			d.ws()
		case ']':
			d.pos++
			return msgs, pending, true
		default:
			if d.pos >= len(d.data) {
				return nil, nil, d.unexpected()
			}
			return nil, nil, d.fail(d.pos, errArray)
		}
	}
}
