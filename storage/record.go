package storage

import (
	"encoding/binary"
	"errors"
)

// Event is one stored event.
type Event struct {
	ID         ID
	Name       string
	VisitorID  string
	HasVisitor bool
	Timestamp  int64 // event time, Unix ms
	CreatedAt  int64 // time of receipt, Unix ms
	Properties []byte
	// Numbers indexes Properties' numeric members (package propnums), as
	// the decoder found them, so that the commit's rollups need not walk
	// Properties again; nil: they walk it. Not stored.
	Numbers []byte
}

const recordVersion = 1

var errCorrupt = errors.New("storage: corrupt record")

// appendRecord encodes e compactly: the id is in the key, the rest here.
func appendRecord(dst []byte, e *Event) []byte {
	dst = append(dst, recordVersion)
	dst = binary.AppendUvarint(dst, uint64(e.Timestamp))
	dst = binary.AppendUvarint(dst, uint64(e.CreatedAt))
	dst = binary.AppendUvarint(dst, uint64(len(e.Name)))
	dst = append(dst, e.Name...)
	if e.HasVisitor {
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, uint64(len(e.VisitorID)))
		dst = append(dst, e.VisitorID...)
	} else {
		dst = append(dst, 0)
	}
	return append(dst, e.Properties...)
}

// decodeRecord fills e from a record; e's strings and properties are copies.
func decodeRecord(p []byte, e *Event) error {
	r, ok := splitRecord(p)
	if !ok {
		return errCorrupt
	}
	e.Timestamp, e.CreatedAt = r.ts, r.createdAt
	e.Name = string(r.name)
	e.HasVisitor, e.VisitorID = r.hasVisitor, string(r.visitor)
	e.Properties, e.Numbers = append([]byte(nil), r.props...), nil
	return nil
}

// recordParts are a record's fields, sharing its bytes.
type recordParts struct {
	ts, createdAt int64
	name, visitor []byte
	hasVisitor    bool
	props         []byte
}

// splitRecord reads a record's fields without copying them, so a reader
// that needs one of them (recordIsBot) allocates nothing.
func splitRecord(p []byte) (recordParts, bool) {
	var r recordParts
	if len(p) < 1 || p[0] != recordVersion {
		return r, false
	}
	p = p[1:]
	var ok bool
	var v uint64
	if v, p, ok = uvarint(p); !ok {
		return r, false
	}
	r.ts = int64(v)
	if v, p, ok = uvarint(p); !ok {
		return r, false
	}
	r.createdAt = int64(v)
	if r.name, p, ok = lenBytes(p); !ok {
		return r, false
	}
	if len(p) < 1 || p[0] > 1 { // visitor flag is 0 or 1
		return r, false
	}
	r.hasVisitor = p[0] == 1
	p = p[1:]
	if r.hasVisitor {
		if r.visitor, p, ok = lenBytes(p); !ok {
			return r, false
		}
	}
	r.props = p
	return r, true
}

func uvarint(p []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, p, false
	}
	return v, p[n:], true
}

// lenBytes reads a uvarint length and that many bytes, sharing p's.
func lenBytes(p []byte) ([]byte, []byte, bool) {
	n, p, ok := uvarint(p)
	if !ok || uint64(len(p)) < n {
		return nil, p, false
	}
	return p[:n], p[n:], true
}
