package storage

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// IdemLookup reads many idempotency keys through one Pebble iterator. A
// Get sets up an iterator over every memtable and level for each key; a
// batch of 100 messages that each carry a key (Segment's messageId, an
// import line's idempotency_key) pays that once here. It sees the store as
// of NewIdemLookup, so a caller creates one per request, after the keys
// still being committed were set aside.
type IdemLookup struct {
	it  *pebble.Iterator
	key []byte
}

// NewIdemLookup opens a lookup; Close releases it.
func (d *DB) NewIdemLookup() (*IdemLookup, error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdem}, UpperBound: []byte{prefixIdem + 1}})
	if err != nil {
		return nil, err
	}
	return &IdemLookup{it: it}, nil
}

// Get is GetIdempotency through the lookup's iterator. The store keys
// whole-key bloom filters (the default Split), so a seek for a key that was
// never written is usually answered by the filters.
func (l *IdemLookup) Get(keyID, key string) (IdemRecord, error) {
	l.key = idemKey(l.key[:0], keyID, key)
	if !l.it.SeekPrefixGE(l.key) || !bytes.Equal(l.it.Key(), l.key) {
		if err := l.it.Error(); err != nil {
			return IdemRecord{}, err
		}
		return IdemRecord{}, ErrNotFound
	}
	v, err := l.it.ValueAndErr()
	if err != nil {
		return IdemRecord{}, err
	}
	return decodeIdemRecord(v)
}

// Close releases the iterator.
func (l *IdemLookup) Close() error { return l.it.Close() }
