package storage

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// IdemLookup reads many idempotency keys: from the idempotency memory
// (idemmem.go), and, while I keys may hold records, through one Pebble
// iterator. A Get sets up an iterator over every memtable and level for
// each key; a batch of 100 messages that each carry a key (Segment's
// messageId, an import line's idempotency_key) pays that once here. Its
// I keys are those of the store when it first needs them, so a caller
// creates one per request, after the keys still being committed were set
// aside.
type IdemLookup struct {
	d   *DB
	it  *pebble.Iterator
	key []byte
}

// NewIdemLookup opens a lookup; Close releases it.
func (d *DB) NewIdemLookup() (*IdemLookup, error) { return &IdemLookup{d: d}, nil }

// Get is GetIdempotency through the lookup's iterator. The store keys
// whole-key bloom filters (the default Split), so a seek for a key that was
// never written is usually answered by the filters.
func (l *IdemLookup) Get(keyID, key string) (IdemRecord, error) {
	if r, ok, err := l.d.getIdem(idemFingerprint(keyID, key)); ok || err != nil {
		return r, err
	}
	if !l.d.idem.pebble.Load() {
		return IdemRecord{}, ErrNotFound
	}
	if l.it == nil {
		it, err := l.d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdem}, UpperBound: []byte{prefixIdem + 1}})
		if err != nil {
			return IdemRecord{}, err
		}
		l.it = it
	}
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
func (l *IdemLookup) Close() error {
	if l.it == nil {
		return nil
	}
	return l.it.Close()
}
