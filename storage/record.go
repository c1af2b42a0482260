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
	if len(p) < 1 || p[0] != recordVersion {
		return errCorrupt
	}
	p = p[1:]
	var ok bool
	var v uint64
	if v, p, ok = uvarint(p); !ok {
		return errCorrupt
	}
	e.Timestamp = int64(v)
	if v, p, ok = uvarint(p); !ok {
		return errCorrupt
	}
	e.CreatedAt = int64(v)
	if e.Name, p, ok = lenString(p); !ok {
		return errCorrupt
	}
	if len(p) < 1 || p[0] > 1 { // visitor flag is 0 or 1
		return errCorrupt
	}
	e.HasVisitor = p[0] == 1
	p = p[1:]
	e.VisitorID = ""
	if e.HasVisitor {
		if e.VisitorID, p, ok = lenString(p); !ok {
			return errCorrupt
		}
	}
	e.Properties = append([]byte(nil), p...)
	return nil
}

func uvarint(p []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, p, false
	}
	return v, p[n:], true
}

func lenString(p []byte) (string, []byte, bool) {
	n, p, ok := uvarint(p)
	if !ok || uint64(len(p)) < n {
		return "", p, false
	}
	return string(p[:n]), p[n:], true
}
