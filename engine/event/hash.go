package event

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Content is what an idempotency hash covers of an input: its name,
// visitor, properties and time as sent (before any sent_at correction), so
// that a retry of the same content hashes the same whatever its sent_at.
type Content struct {
	Name         string
	VisitorID    string
	HasVisitor   bool
	Properties   []byte
	Timestamp    int64
	HasTimestamp bool
}

// SetHash hashes a keyed input's content; the decoders call it before the
// time is corrected for sent_at, and it keeps that time in HashedTime.
func (in *Input) SetHash() {
	in.HashedTime = in.Timestamp
	c := in.Content()
	in.Hash = ContentHash(&c)
}

// Content is what Hash covers: the input with its time as sent.
func (in *Input) Content() Content {
	return Content{Name: in.Name, VisitorID: in.VisitorID, HasVisitor: in.HasVisitor,
		Properties: in.Properties, Timestamp: in.HashedTime, HasTimestamp: in.HasTimestamp}
}

// ContentHash is the idempotency hash of a content: xxhash 64 over name,
// visitor, properties and timestamp. 0xff separates the parts because it
// never occurs in UTF-8 text, so different splits cannot collide by
// concatenation; a byte 1 or 0 tells a present visitor or time from an
// absent one. The bytes hashed are those LegacyContentHash hashes.
func ContentHash(c *Content) uint64 {
	// The bytes laid out and hashed in one call: a Digest fed seven pieces
	// cost a Segment message's hash 1,070 instructions (docs/benchmarks.md,
	// session 37). Contents up to 1 KiB, nearly all, are laid out on the
	// stack.
	var stack [contentHashBuf]byte
	b := stack[:0]
	if n := len(c.Name) + len(c.VisitorID) + len(c.Properties) + 13; n > len(stack) {
		b = make([]byte, 0, n)
	}
	b = append(b, c.Name...)
	if c.HasVisitor {
		b = append(b, 0xff, 1)
		b = append(b, c.VisitorID...)
	} else {
		b = append(b, 0xff, 0)
	}
	b = append(b, 0xff)
	b = append(b, c.Properties...)
	if c.HasTimestamp {
		b = append(b, 0xff, 1)
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Timestamp))
	} else {
		b = append(b, 0xff, 0)
	}
	return xxhash.Sum64(b)
}

// LegacyContentHash is the content hash of the builds before xxhash, FNV-1a
// 64 over the same parts. Idempotency records stored by those builds hold
// it, so for the 24 hours that such a record lives a retry whose
// ContentHash differs from the stored hash is compared with this one too
// (docs/decisions.md, "Content hash"). It costs about 1 ns per byte, which
// is why ContentHash replaced it.
func LegacyContentHash(c *Content) uint64 {
	h := fnvString(fnvOffset, c.Name)
	h = (h ^ 0xff) * fnvPrime
	if c.HasVisitor {
		h = fnvString((h^1)*fnvPrime, c.VisitorID)
	} else {
		h *= fnvPrime // the byte 0: no visitor
	}
	h = (h ^ 0xff) * fnvPrime
	for _, b := range c.Properties {
		h = (h ^ uint64(b)) * fnvPrime
	}
	h = (h ^ 0xff) * fnvPrime
	if !c.HasTimestamp {
		return h * fnvPrime // the byte 0: no timestamp
	}
	h = (h ^ 1) * fnvPrime
	for i := 0; i < 64; i += 8 {
		h = (h ^ uint64(byte(c.Timestamp>>i))) * fnvPrime
	}
	return h
}

// contentHashBuf is the largest content ContentHash lays out on the stack.
const contentHashBuf = 1024

const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}
