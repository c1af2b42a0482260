package storage

import (
	"bytes"
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
)

// A displaced event (its timestamp is not its id's millisecond: a client's
// or an import's time) is kept apart from the events written at their own
// time. Its record is under Z ds id, in the order of commits; its place in
// the time order under M ds ts id and its name index entry under
// J ds len name ts id. Such times lag what is being written by up to the
// clients' queueing delays: an SDK sends every few seconds, a mobile app
// every 30. Under S and N, every flushed table of them overlapped the
// tables below that hold those seconds, and Pebble rewrote both: 1.5 to 3
// times the storage CPU per event (docs/benchmarks.md, session 20). Under
// keys of their own the late keys only meet each other, and the records,
// the bulk of the bytes, are written in commit order.
//
// Readers of a time range walk S and M (or N and J) together through a
// timeIter. A store written before session 21 keeps its displaced events'
// records under S with an 8-byte Z value, which every reader still reads.

// displacedValue splits a Z value: the timestamp, then the record, which
// is nil in the form written before session 21 (the record is under S).
func displacedValue(v []byte) (ts int64, record []byte, ok bool) {
	if len(v) < 8 {
		return 0, nil, false
	}
	ts = int64(binary.BigEndian.Uint64(v))
	if len(v) > 8 {
		record = v[8:]
	}
	return ts, record, true
}

// displacedPrefix is the prefix byte of the displaced events' keys beside
// the index under p: M beside S, J beside N.
func displacedPrefix(p byte) byte {
	if p == prefixName {
		return prefixDisplacedName
	}
	return prefixDisplacedMark
}

// timeIter walks an index range of S (or N) keys and the same range of
// their displaced events' M (or J) keys as one index in (ts, id) order.
// Key gives every entry under the S (or N) prefix, so readers parse both
// alike; late tells which one the entry is. The two ranges hold different
// events, so no key is in both.
type timeIter struct {
	its [2]*pebble.Iterator // 0: S or N; 1: M or J
	pfx [2]byte             // their prefixes
	ok  [2]bool
	cur int  // the iterator at the current entry, -1 for none
	fwd bool // the direction of the last move
	key []byte
}

// openTime opens a timeIter over [lower, upper), bounds under S or N, on
// r (the store or a snapshot).
func openTime(r pebble.Reader, lower, upper []byte) (*timeIter, error) {
	t := &timeIter{cur: -1, pfx: [2]byte{lower[0], displacedPrefix(lower[0])}}
	var err error
	if t.its[0], err = r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}); err != nil {
		return nil, err
	}
	// A clone shares the first's view: a commit cannot show in one range
	// and not the other.
	t.its[1], err = t.its[0].Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{
		LowerBound: withPrefix(lower, t.pfx[0], t.pfx[1]),
		UpperBound: withPrefix(upper, t.pfx[0], t.pfx[1]),
	}})
	if err != nil {
		_ = t.its[0].Close()
		return nil, err
	}
	return t, nil
}

// withPrefix is bound k of from's keys moved under prefix to; a bound past
// from's keys (none, or the next prefix) becomes the end of to's.
func withPrefix(k []byte, from, to byte) []byte {
	if len(k) == 0 || k[0] != from {
		return []byte{to + 1}
	}
	out := append([]byte(nil), k...)
	out[0] = to
	return out
}

// pick makes the nearer of the two positioned iterators current: the
// smaller key going forward, the larger going back.
func (t *timeIter) pick() bool {
	t.cur = -1
	switch {
	case t.ok[0] && t.ok[1]:
		c := bytes.Compare(t.its[0].Key()[1:], t.its[1].Key()[1:])
		if (c < 0) == t.fwd {
			t.cur = 0
		} else {
			t.cur = 1
		}
	case t.ok[0]:
		t.cur = 0
	case t.ok[1]:
		t.cur = 1
	}
	return t.cur >= 0
}

// First moves to the oldest entry.
func (t *timeIter) First() bool {
	t.fwd = true
	t.ok[0], t.ok[1] = t.its[0].First(), t.its[1].First()
	return t.pick()
}

// Last moves to the newest entry.
func (t *timeIter) Last() bool {
	t.fwd = false
	t.ok[0], t.ok[1] = t.its[0].Last(), t.its[1].Last()
	return t.pick()
}

// Next moves to the next entry. After a move back, the other iterator is
// before the current entry, so it seeks past it first.
func (t *timeIter) Next() bool {
	if t.cur < 0 {
		return false
	}
	if !t.fwd {
		t.fwd = true
		o := 1 - t.cur
		t.ok[o] = t.its[o].SeekGE(t.otherKey(o))
	}
	t.ok[t.cur] = t.its[t.cur].Next()
	return t.pick()
}

// Prev moves to the entry before, as Next does the other way.
func (t *timeIter) Prev() bool {
	if t.cur < 0 {
		return false
	}
	if t.fwd {
		t.fwd = false
		o := 1 - t.cur
		t.ok[o] = t.its[o].SeekLT(t.otherKey(o))
	}
	t.ok[t.cur] = t.its[t.cur].Prev()
	return t.pick()
}

// otherKey is the current key under iterator o's prefix.
func (t *timeIter) otherKey(o int) []byte {
	t.key = append(t.key[:0], t.its[t.cur].Key()...)
	t.key[0] = t.pfx[o]
	return t.key
}

// Valid reports whether the iterator is at an entry.
func (t *timeIter) Valid() bool { return t.cur >= 0 }

// late reports whether the current entry is a displaced event's (M or J).
func (t *timeIter) late() bool { return t.cur == 1 }

// Key is the current entry's key under the S (or N) prefix.
func (t *timeIter) Key() []byte {
	k := t.its[t.cur].Key()
	if t.cur == 0 {
		return k
	}
	t.key = append(t.key[:0], k...)
	t.key[0] = t.pfx[0]
	return t.key
}

// Value is the current entry's value: a record under S, the bot mark
// under M, the bot mark and visitor under N and J.
func (t *timeIter) Value() []byte { return t.its[t.cur].Value() }

// Error is the first iterator's error.
func (t *timeIter) Error() error {
	if err := t.its[0].Error(); err != nil {
		return err
	}
	return t.its[1].Error()
}

// Close releases both iterators.
func (t *timeIter) Close() error {
	err := t.its[0].Close()
	if err1 := t.its[1].Close(); err == nil {
		err = err1
	}
	return err
}
