package event

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
	var ks keySet
	var known uint32 // the known fields met, by kind (markKind)
	for {
		key, ok := d.key()
		if !ok || !d.colon() {
			return false
		}
		kind := segFieldOf(key, batch)
		var dup bool
		if kind != sgUnknown {
			dup = markKind(&known, kind)
		} else {
			dup = d.seen(base, key, &ks)
		}
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
				esc := false
				if j := plainEnd(d.data, start+1); j >= 0 {
					d.pos = j + 1
				} else if esc, ok = d.str(); !ok {
					return false
				}
				*fv = segField{state: present, esc: esc, start: start + 1, end: d.pos - 1}
			case c == '{' && depth != 0:
				spaces := d.spaces
				if kind == sgProps {
					d.propsAt = d.pos
				}
				ok := d.value(depth)
				d.propsAt = 0
				if !ok {
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
