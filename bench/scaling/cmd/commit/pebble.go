package main

import (
	"encoding/binary"
	"os"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleCommitter writes each payload as records of 230 bytes in one
// batch committed with pebble.Sync: eventd's durability point today.
type pebbleCommitter struct {
	dir string
	db  *pebble.DB
	seq atomic.Uint64
}

func openPebble() (committer, error) {
	dir, err := os.MkdirTemp("", "scaling-pebble-")
	if err != nil {
		return nil, err
	}
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		return nil, err
	}
	return &pebbleCommitter{dir: dir, db: db}, nil
}

func (p *pebbleCommitter) commit(_ int, payload []byte) error {
	b := p.db.NewBatch()
	defer b.Close()
	var key [9]byte
	key[0] = 'E'
	for off := 0; off < len(payload); off += len(event) {
		binary.BigEndian.PutUint64(key[1:], p.seq.Add(1))
		if err := b.Set(key[:], payload[off:off+len(event)], nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

func (p *pebbleCommitter) close() {
	p.db.Close()
	os.RemoveAll(p.dir)
}
