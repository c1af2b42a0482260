package event

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
	segFinish(body, &f, &d.nums, typ, &env, receivedAtMs, details, &r)
	return r.msg, nil
}

// DecodeSegmentBatch decodes /v1/batch and /v1/import: {"batch":[...], "sentAt":..., "context":{...}, ...}.
// p != nil refuses the whole body (not JSON, not an object, no "batch"
// array, or a bad envelope field: sentAt, context, duplicate keys).
// Otherwise there is one SegmentMessage per element, in order, each
// possibly with its own Problem; an empty batch is no messages.
func DecodeSegmentBatch(body []byte, receivedAtMs int64) (msgs []SegmentMessage, p *Problem) {
	return DecodeSegmentBatchInto(nil, body, receivedAtMs)
}

// DecodeSegmentBatchInto is DecodeSegmentBatch appending the messages to
// dst[:0], so that a caller may reuse one slice for many batches (a
// batch's 100 messages are 23 KB).
func DecodeSegmentBatchInto(dst []SegmentMessage, body []byte, receivedAtMs int64) (msgs []SegmentMessage, p *Problem) {
	d := decoder{data: body}
	d.ws()
	if d.next() != '{' {
		return nil, d.notObject()
	}
	d.pos++
	d.ws()
	var details map[string]string
	var ks keySet
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
			dup := d.seen(0, key, &ks)
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
				if msgs, pending, ok = d.segBatch(dst[:0], &env, receivedAtMs); !ok {
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
			segFinish(body, &f, &d.nums, 0, &env, receivedAtMs, details, &r)
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

// segBatch decodes the batch array at d.pos ('[') into msgs, which it
// appends to. Messages mapped without an envelope field not yet scanned
// are listed in pending for the caller.
func (d *decoder) segBatch(msgs []SegmentMessage, env *segEnv, receivedAt int64) (_ []SegmentMessage, pending []segPending, ok bool) {
	d.pos++ // '['
	d.ws()
	if d.next() == ']' {
		d.pos++
		return msgs, nil, true
	}
	if cap(msgs) == 0 {
		// Sized for the body at one message per 512 bytes (Segment
		// messages carry a context), so that a batch is not copied as it
		// grows; at most MaxSegmentBatch/512 messages' room (about 230 KB).
		msgs = make([]SegmentMessage, 0, min(MaxSegmentBatch/512, max(16, (len(d.data)-d.pos)/512)))
	}
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
				segFinish(d.data, &f, &d.nums, 0, env, receivedAt, details, &r)
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
