package storage

import (
	"encoding/binary"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// prefixLog keys the derived log: L seq -> the cells one commit added
// (derived.go). Entries live from their commit to the next checkpoint.
const prefixLog = 'L'

// logVersion is the first byte of an L value.
const logVersion = 1

func logKey(dst []byte, seq uint64) []byte {
	dst = append(dst, prefixLog)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// appendLog encodes a batch's cells:
//
//	version | per cell: uvarint ds, len name, uvarint minute index, varint count,
//	uvarint nhll, nhll x 3 bytes, uvarint nprops, nprops x (len name, sum f64, comp f64, uvarint n)
func appendLog(dst []byte, r *rollups) []byte {
	dst = append(dst, logVersion)
	for c, a := range r.cells {
		dst = binary.AppendUvarint(dst, uint64(c.ds))
		dst = append(dst, byte(len(c.name)))
		dst = append(dst, c.name...)
		dst = binary.AppendUvarint(dst, uint64(c.minute/minuteMs))
		dst = binary.AppendVarint(dst, a.count)
		dst = binary.AppendUvarint(dst, uint64(len(a.hll)))
		for _, e := range a.hll {
			dst = append(dst, byte(e>>16), byte(e>>8), byte(e))
		}
		dst = binary.AppendUvarint(dst, uint64(len(a.props)))
		for _, p := range a.props {
			dst = append(dst, byte(len(p.name)))
			dst = append(dst, p.name...)
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.v.sum))
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.v.comp))
			dst = binary.AppendUvarint(dst, uint64(p.v.n))
		}
	}
	return dst
}

// logReader walks an encoded L value.
type logReader struct {
	p   []byte
	bad bool
}

func (l *logReader) uvarint() uint64 { return readVarint(l, binary.Uvarint) }

func (l *logReader) varint() int64 { return readVarint(l, binary.Varint) }

// readVarint reads one (u)varint with decode, marking l bad when it is cut short.
func readVarint[T int64 | uint64](l *logReader, decode func([]byte) (T, int)) T {
	v, n := decode(l.p)
	if n <= 0 {
		l.bad = true
		return 0
	}
	l.p = l.p[n:]
	return v
}

func (l *logReader) bytes(n int) []byte {
	if n > len(l.p) {
		l.bad = true
		return nil
	}
	b := l.p[:n]
	l.p = l.p[n:]
	return b
}

func (l *logReader) name() string {
	n := l.bytes(1)
	if l.bad {
		return ""
	}
	return string(l.bytes(int(n[0])))
}

// decodeLog adds the cells of an L value to r.
func decodeLog(v []byte, r *rollups) error {
	if len(v) == 0 || v[0] != logVersion {
		return errCorrupt
	}
	l := logReader{p: v[1:]}
	for len(l.p) > 0 && !l.bad {
		ds := l.uvarint()
		name := l.name()
		minute := int64(l.uvarint()) * minuteMs
		a := r.cell(uint32(ds), name, minute)
		a.count += l.varint()
		nh := l.uvarint()
		if nh > uint64(len(l.p))/3 {
			return errCorrupt
		}
		for range nh {
			b := l.bytes(3)
			a.hll = append(a.hll, uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2]))
		}
		np := l.uvarint()
		if np > MaxBucketProperties*2 {
			return errCorrupt
		}
		for range np {
			pn := l.name()
			b := l.bytes(16)
			cnt := l.uvarint()
			if l.bad {
				return errCorrupt
			}
			addSum(a, r, pn, sumValue{
				sum:  math.Float64frombits(binary.LittleEndian.Uint64(b)),
				comp: math.Float64frombits(binary.LittleEndian.Uint64(b[8:])),
				n:    int64(cnt),
			})
		}
	}
	if l.bad {
		return errCorrupt
	}
	return nil
}

// replayLog folds every L entry left by a crash into the overlay and sets
// the next sequence number after the last one.
func (dv *derived) replayLog() (int, error) {
	lo := []byte{prefixLog}
	it, err := dv.db.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return n, errCorrupt
		}
		seq := binary.BigEndian.Uint64(k[1:])
		r := newRollups()
		if err := decodeLog(it.Value(), r); err != nil {
			return n, err
		}
		dv.fold(seq, r, nil)
		dv.seq.Store(max(dv.seq.Load(), seq))
		n++
	}
	return n, it.Error()
}
