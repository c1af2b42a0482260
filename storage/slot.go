package storage

import (
	"errors"
)

// mergeSlot is the counter slot of writers without a slot of their own
// (imports, erasure): they add merge operands.
const mergeSlot = 0xff

// maxSlotEntries bounds a slot's cache; past it the cache starts over and
// values are read back from Pebble when next touched.
const maxSlotEntries = 1 << 16

// CounterSlot is one writer's slot of the event counters. Hot buckets (the
// current minute, hour and day) change with every group commit; as merge
// operands they would pile up in the memtable, and every read of a total
// would fold thousands of them. A slot instead writes each bucket's running
// value with Set, from a cache it alone updates, so a read finds one value
// per slot.
type CounterSlot struct {
	id     byte
	values map[string]int64
}

// NewCounterSlot makes slot id (0-254); each id must have a single writer.
func NewCounterSlot(id int) *CounterSlot {
	return &CounterSlot{id: byte(id), values: make(map[string]int64)}
}

// add returns the bucket's new value, reading it from Pebble the first time.
func (s *CounterSlot) add(d *DB, key []byte, n int64) (int64, error) {
	v, ok := s.values[string(key)]
	if !ok {
		p, err := d.get(key)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return 0, err
		default:
			v = decodeCount(p)
		}
		if len(s.values) >= maxSlotEntries {
			clear(s.values)
		}
	}
	v += n
	s.values[string(key)] = v
	return v, nil
}

// Forget drops the cache, after a failed commit or when keys were deleted
// behind the slot's back; it must be called by the slot's writer.
func (s *CounterSlot) Forget() { clear(s.values) }
