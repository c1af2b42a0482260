package storage

import "github.com/cockroachdb/pebble/v2"

// moveChunk is how many keys a layout move rewrites per batch.
const moveChunk = 10_000

// moveKeys rewrites every key under prefix p of an older layout: rewrite
// sets the key's new form (or forms) in b, in batches of moveChunk keys
// that need no sync of their own (the WAL is in order: the last one's sync
// covers them). With resume, each batch also deletes the old keys it
// moved, so a crash in the middle leaves a store that the next Open goes
// on moving where it stopped; without, the old keys all go in the last
// batch, so until then they stay whole for a reader of the old layout (a
// read-only open) and a crash means moving again from the start. The last
// batch also runs last (nil: nothing) and is synced. It returns how many
// keys it moved; progress, if not nil, hears of every 100,000.
func (d *DB) moveKeys(p byte, resume bool, rewrite func(b *pebble.Batch, key, value []byte) error, last func(b *pebble.Batch) error, progress func(moved int)) (int, error) {
	lo, hi := []byte{p}, []byte{p + 1}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := d.db.NewBatch()
	defer func() { _ = b.Close() }()
	var first []byte // the batch's first old key: it deletes [first, end)
	commit := func(end []byte, opts *pebble.WriteOptions) error {
		if first != nil {
			if err := b.DeleteRange(first, end, nil); err != nil {
				return err
			}
		}
		if err := d.db.Apply(b, opts); err != nil {
			return err
		}
		_ = b.Close()
		b, first = d.db.NewBatch(), nil
		return nil
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if first == nil && resume {
			first = append(first, it.Key()...)
		}
		if err := rewrite(b, it.Key(), it.Value()); err != nil {
			return n, err
		}
		if n++; n%moveChunk == 0 {
			if err := commit(append(append([]byte(nil), it.Key()...), 0), pebble.NoSync); err != nil {
				return n, err
			}
			if progress != nil && n%100_000 == 0 {
				progress(n)
			}
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	if last != nil {
		if err := last(b); err != nil {
			return n, err
		}
	}
	if !resume {
		first = lo
	}
	return n, commit(hi, pebble.Sync)
}

// hasKeys reports whether the store holds any key under prefix p (an
// older layout's, that Open moves).
func (d *DB) hasKeys(p byte) (bool, error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
	if err != nil {
		return false, err
	}
	found := it.First()
	return found, it.Close()
}
