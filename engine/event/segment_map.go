package event

import (
	"bytes"
	"unicode/utf8"
	"unsafe"

	"github.com/eventd/eventd/storage/propnums"
)

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
	// renamed is the last track event name that needed normalizing: a
	// batch's messages mostly share a few names ("Order Completed").
	renamed struct {
		raw  []byte // the name as sent, escapes and all (aliases the body)
		name [MaxNameLen]byte
		n    int
		diff bool // the native name differs from the unescaped one
	}
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
// the mapped message into r. details holds the scan's problems so far, nums
// the numeric members of its properties object.
func segFinish(data []byte, f *[sgCount]segField, nums *propnums.Recorder, typ SegmentType, env *segEnv, receivedAt int64, details map[string]string, r *segResult) {
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
			rn := &env.renamed
			switch {
			case !fv.esc && checkName(raw) == "" && raw[0] != '_' && raw[len(raw)-1] != '_':
				name = raw // already a native name: nothing to do
			case rn.raw != nil && bytes.Equal(raw, rn.raw):
				name, renamed = rn.name[:rn.n], rn.diff // as the message before
			default:
				orig := fv.text(data)
				n := normalizeName(&nameBuf, orig)
				name = nameBuf[:n]
				renamed = !bytes.Equal(name, orig)
				rn.raw, rn.name, rn.n, rn.diff = raw, nameBuf, n, renamed
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
		if !idemKeyLenOK(fv.text(data)) {
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
	// The index of the properties' numbers (propnums) follows them in the
	// same allocation. The message's members keep their offsets when its
	// object is copied as sent (no whitespace, no member dropped for a
	// mapped one), and the mapped members are never numbers.
	hasMembers := props.state == present && props.size > 2
	collide := hasMembers && segMayCollide(data[props.start:props.end], mask)
	var noNums propnums.Recorder
	switch {
	case !hasMembers:
		nums = &noNums
	case props.size != props.end-props.start || collide:
		nums = nil
	}
	if nums != nil {
		size += nums.Len()
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
	if hasMembers {
		raw := data[props.start:props.end]
		if collide {
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
	end := len(buf)
	if nums != nil {
		buf = nums.AppendTo(buf, end-nt)
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
	in.Properties = buf[nt:end:end]
	in.Numbers = nil
	if end < len(buf) {
		in.Numbers = buf[end:]
	}
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
	in.SetHash()
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
//
// Each test starts with what is rare in properties (a backslash, a '$', a
// key's last letters before its closing quote): a search for a pattern
// that starts with a quote stops at every string of the object, and was
// 7.5% of decoding a Segment batch. Matching more than the keys (name" in
// "username") is fine: only false must be certain.
func segMayCollide(obj []byte, mask uint) bool {
	if bytes.IndexByte(obj, '\\') >= 0 && bytes.Contains(obj, []byte(`\u`)) {
		return true
	}
	if mask&^(1<<mkName|1<<mkCategory) != 0 && bytes.IndexByte(obj, '$') >= 0 && bytes.Contains(obj, []byte(`"$`)) {
		return true
	}
	return (mask&(1<<mkName) != 0 && bytes.Contains(obj, []byte(`name"`))) ||
		(mask&(1<<mkCategory) != 0 && bytes.Contains(obj, []byte(`category"`)))
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
