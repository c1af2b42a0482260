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
// the bulk of the bytes, are written in commit order. The M and J keys of
// recent times are held in memory first and written in time order
// (latemem.go), so they do not merge either.
//
// Readers of a time range walk S and M (or N and J), and the keys memory
// holds, together through a timeIter. A store written before session 21 keeps its displaced events'
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

// timeIter walks an index range of S (or N) keys, the same range of their
// displaced events' M (or J) keys and those of them still in memory
// (latemem.go) as one index in (ts, id) order. Key gives every entry under
// the S (or N) prefix, so readers parse all alike; late tells an entry of a
// displaced event. A key in memory and in Pebble (a cell being written, or
// after a crash) is given once.
type timeIter struct {
	srcs []timeSource // 0: S or N; 1: M or J; 2: memory, when it holds any
	pfx  []byte       // their prefixes (memory's keys are under M or J)
	ok   []bool
	cur  int  // the source at the current entry, -1 for none
	fwd  bool // the direction of the last move
	key  []byte
}

// timeSource is what timeIter uses of a *pebble.Iterator, and memSource
// has too.
type timeSource interface {
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	SeekGE(key []byte) bool
	SeekLT(key []byte) bool
	Key() []byte
	Value() []byte
	Close() error
}

// openTime opens a timeIter over [lower, upper), bounds under S or N.
func (d *DB) openTime(lower, upper []byte) (*timeIter, error) {
	ts, err := d.openTimes([][]byte{lower, upper})
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

// openTimes opens a timeIter over each range [bounds[i], bounds[i+1]),
// bounds increasing under one S or N prefix, all on one view of Pebble
// and of memory: a commit shows in every range or in none, so pieces read
// on several goroutines add up to what one reader would see.
func (d *DB) openTimes(bounds [][]byte) (_ []*timeIter, err error) {
	p := [2]byte{bounds[0][0], displacedPrefix(bounds[0][0])}
	late := func(k []byte) []byte { return withPrefix(k, p[0], p[1]) }
	out := make([]*timeIter, 0, len(bounds)-1)
	defer func() {
		if err != nil {
			for _, t := range out {
				_ = t.Close()
			}
		}
	}()
	// The memory's copy and the Pebble view are taken under its lock: a
	// cell written meanwhile is in one or both, never in neither.
	l := d.late
	l.mu.Lock()
	defer l.mu.Unlock()
	// The entries of commits in flight first, as the visitor memory's
	// readers take them (visitors.go): a commit the view below shows may
	// not have added them to memory yet.
	pending := d.inflightLate(late(bounds[0]))
	// Clones share the first iterator's view.
	var first *pebble.Iterator
	open := func(lo, hi []byte) (*pebble.Iterator, error) {
		o := &pebble.IterOptions{LowerBound: lo, UpperBound: hi}
		if first == nil {
			it, err := d.db.NewIter(o)
			first = it
			return it, err
		}
		return first.Clone(pebble.CloneOptions{IterOptions: o})
	}
	for i := 0; i+1 < len(bounds); i++ {
		lo, hi := bounds[i], bounds[i+1]
		main, err := open(lo, hi)
		if err != nil {
			return nil, err
		}
		displaced, err := open(late(lo), late(hi))
		if err != nil {
			_ = main.Close()
			return nil, err
		}
		t := &timeIter{srcs: []timeSource{main, displaced}, pfx: []byte{p[0], p[1]}, cur: -1}
		if mem := l.source(pending, late(lo), late(hi)); mem != nil {
			t.srcs = append(t.srcs, mem)
			t.pfx = append(t.pfx, p[1])
		}
		t.ok = make([]bool, len(t.srcs))
		out = append(out, t)
	}
	return out, nil
}

// pick makes the nearest positioned source current: the smallest key
// going forward, the largest going back; of equal keys, the first.
func (t *timeIter) pick() bool {
	t.cur = -1
	for i, s := range t.srcs {
		if !t.ok[i] {
			continue
		}
		if t.cur < 0 {
			t.cur = i
			continue
		}
		c := bytes.Compare(s.Key()[1:], t.srcs[t.cur].Key()[1:])
		if (t.fwd && c < 0) || (!t.fwd && c > 0) {
			t.cur = i
		}
	}
	return t.cur >= 0
}

// First moves to the oldest entry.
func (t *timeIter) First() bool {
	t.fwd = true
	for i, s := range t.srcs {
		t.ok[i] = s.First()
	}
	return t.pick()
}

// Last moves to the newest entry.
func (t *timeIter) Last() bool {
	t.fwd = false
	for i, s := range t.srcs {
		t.ok[i] = s.Last()
	}
	return t.pick()
}

// Next moves to the next entry. After a move back, the other sources are
// before the current entry, so they seek to it first; then every source
// at it (a repeat too) steps past it.
func (t *timeIter) Next() bool { return t.step(true) }

// Prev moves to the entry before, as Next does the other way.
func (t *timeIter) Prev() bool { return t.step(false) }

func (t *timeIter) step(fwd bool) bool {
	if t.cur < 0 {
		return false
	}
	cur := append(t.key[:0], t.srcs[t.cur].Key()...)
	t.key = cur
	if t.fwd != fwd {
		t.fwd = fwd
		seek := make([]byte, len(cur))
		copy(seek, cur)
		for i, s := range t.srcs {
			if i == t.cur {
				continue
			}
			seek[0] = t.pfx[i]
			if fwd {
				t.ok[i] = s.SeekGE(seek)
			} else {
				t.ok[i] = s.SeekLT(seek)
			}
		}
	}
	for i, s := range t.srcs {
		if t.ok[i] && bytes.Equal(s.Key()[1:], cur[1:]) {
			if fwd {
				t.ok[i] = s.Next()
			} else {
				t.ok[i] = s.Prev()
			}
		}
	}
	return t.pick()
}

// Valid reports whether the iterator is at an entry.
func (t *timeIter) Valid() bool { return t.cur >= 0 }

// late reports whether the current entry is a displaced event's (M or J,
// or memory).
func (t *timeIter) late() bool { return t.cur >= 1 }

// Key is the current entry's key under the S (or N) prefix.
func (t *timeIter) Key() []byte {
	k := t.srcs[t.cur].Key()
	if t.cur == 0 {
		return k
	}
	t.key = append(t.key[:0], k...)
	t.key[0] = t.pfx[0]
	return t.key
}

// Value is the current entry's value: a record under S, the bot mark
// under M, the bot mark and visitor under N and J.
func (t *timeIter) Value() []byte { return t.srcs[t.cur].Value() }

// Error is the first Pebble iterator's error.
func (t *timeIter) Error() error {
	for _, s := range t.srcs[:2] {
		if err := s.(*pebble.Iterator).Error(); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the iterators.
func (t *timeIter) Close() error {
	var err error
	for _, s := range t.srcs {
		if e := s.Close(); err == nil {
			err = e
		}
	}
	return err
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
