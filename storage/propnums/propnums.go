// Package propnums indexes the top-level numeric members of an event's
// properties object: the decoder notes them as it scans the request body,
// and a commit reads them from the index instead of walking the object a
// second time. The commit runs on the shard's core, after another core
// decoded the body, so its walk of every member read cold cache lines:
// 0.27 µs an event, 7.6% of a batch's CPU in the bench's profile
// (docs/benchmarks.md, session 35).
//
// An index is its object's length (2 bytes), then per member four
// offsets from the object's first byte (2 bytes each): the key's start
// and end (between its quotes) and the number's start and end. Only
// members with an unescaped key of at most MaxKeyLen bytes and a number
// value are listed, the first MaxMembers of them, in document order:
// what the rollups sum (storage's eachNumber). An object longer than
// 65,535 bytes is not indexed.
package propnums

import "encoding/binary"

const (
	// MaxMembers is how many numeric members are listed: the rollups sum
	// the first 16 of an event (storage.MaxRollupProperties).
	MaxMembers = 16
	// MaxKeyLen is the longest key listed (storage.MaxRollupPropertyLen).
	MaxKeyLen = 128
)

// maxObject is the longest object an index's 2-byte offsets can describe.
const maxObject = 1<<16 - 1

// Recorder collects an object's numeric members while it is scanned; the
// zero value is empty.
type Recorder struct {
	n   int
	off [MaxMembers][4]uint16
}

// Reset empties r for the next object.
func (r *Recorder) Reset() { r.n = 0 }

// Add notes a member whose unescaped key lies at [ks, ke) and whose number
// lies at [vs, ve), offsets from the object's '{'. Keys longer than
// MaxKeyLen and members past MaxMembers are left out, as the rollups
// leave them out.
func (r *Recorder) Add(ks, ke, vs, ve int) {
	if r.n < MaxMembers && ke-ks <= MaxKeyLen {
		r.off[r.n] = [4]uint16{uint16(ks), uint16(ke), uint16(vs), uint16(ve)}
		r.n++
	}
}

// Len is the number of bytes AppendTo appends for an object of up to
// 65,535 bytes.
func (r *Recorder) Len() int { return 2 + 8*r.n }

// AppendTo appends r's index of an object of objLen bytes to dst; nothing
// if the object is too long for an index's offsets.
func (r *Recorder) AppendTo(dst []byte, objLen int) []byte {
	if objLen > maxObject {
		return dst
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(objLen))
	for _, o := range r.off[:r.n] {
		for _, x := range o {
			dst = binary.LittleEndian.AppendUint16(dst, x)
		}
	}
	return dst
}

// Each calls fn with the key and the number text of each member idx
// lists in obj, in order, until fn returns false. It returns false, having
// called fn for none or some members, if idx is not an index of obj (of
// another length, or an offset out of place): the caller then walks obj
// itself. An index of an object that was since replaced therefore fails
// here instead of naming wrong bytes, unless the new object has the old
// one's length; whoever replaces an event's properties drops its index.
func Each(obj, idx []byte, fn func(key, num []byte) bool) bool {
	if len(idx) < 2 || (len(idx)-2)%8 != 0 || int(binary.LittleEndian.Uint16(idx)) != len(obj) {
		return false
	}
	for e := idx[2:]; len(e) > 0; e = e[8:] {
		ks, ke := int(binary.LittleEndian.Uint16(e)), int(binary.LittleEndian.Uint16(e[2:]))
		vs, ve := int(binary.LittleEndian.Uint16(e[4:])), int(binary.LittleEndian.Uint16(e[6:]))
		if ks < 2 || ks > ke || ke+1 >= vs || vs >= ve || ve >= len(obj) || obj[ks-1] != '"' || obj[ke] != '"' {
			return false
		}
		if !fn(obj[ks:ke], obj[vs:ve]) {
			return true
		}
	}
	return true
}
