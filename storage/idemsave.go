package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The idempotency filter (idemslots.go) is saved in the store's directory
// every Options.IdempotencyFilterSave and at Close, so that a start reads
// it and replays only the records of the seconds since, instead of every
// record's key: 0.5-0.8 µs a key, 13 s at the default bound, which keyed
// writes wait for.
//
// A save raises the filter's floor, the lowest slot it takes, to its
// clock less idemSaveMargin, then copies the table. Every key inserted
// after the copy is of a slot at or above the floor, and a record of an
// earlier slot goes to the day layout instead, so the copy and the
// records from the floor on find every record. The file is derived data:
// without it, or with one that does not check out, a start reads every
// record as before.

// idemFilterFile is the saved filter's name in the store's directory.
const idemFilterFile = "eventd-idempotency-filter"

// idemSaveMargin puts a save's floor behind its clock: the records being
// committed as it is taken are of their shard's clock when it built their
// batch, moments before.
const idemSaveMargin = 60 * idemSlotsPerSecond // a minute

// DefaultIdempotencyFilterSave is how often the filter is saved when
// Options.IdempotencyFilterSave is 0: a start then replays at most about
// eleven minutes of keyed writes. A save copies the table (61 ms at the
// bound, holding keyed writes) and writes it.
const DefaultIdempotencyFilterSave = 10 * time.Minute

// idemFileMagic starts the file; the version is its last byte: 4 since
// the filter's buckets hold eight entries, so that a save of version 1
// (seconds), 2 (a build of session 30, seconds in 17 bits) or 3 (buckets
// of four: its entries would be read into the wrong buckets) is not read:
// a start rebuilds from the records, once.
var idemFileMagic = [8]byte{'e', 'v', 'i', 'd', 'f', 'l', 't', 4}

// idemFileHead is the file's bytes before the entries.
const idemFileHead = 8 + 8 + 8 + 4

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// saveIdemSlots writes the filter to its file: magic, seed, floor, the
// number of entries, the entries, then a CRC-32C of all of it; written
// under another name, synced and renamed over the last.
func (d *DB) saveIdemSlots() error {
	f := d.idemSlots.filter
	if f == nil || d.readOnly {
		return nil
	}
	floor := idemSlot(d.now().UnixMilli()) - idemSaveMargin
	entries := f.Save(floor)
	path := d.fs.PathJoin(d.dir, idemFilterFile)
	tmp := path + ".tmp"
	file, err := d.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	crc := crc32.New(crcTable)
	w := bufio.NewWriterSize(io.MultiWriter(file, crc), 1<<20)
	var head [idemFileHead]byte
	copy(head[:], idemFileMagic[:])
	binary.LittleEndian.PutUint64(head[8:], d.idemSlots.seed.Load())
	binary.LittleEndian.PutUint64(head[16:], floor)
	binary.LittleEndian.PutUint32(head[24:], uint32(len(entries)))
	_, err = w.Write(head[:])
	var b [8]byte
	for _, e := range entries {
		if err != nil {
			break
		}
		binary.LittleEndian.PutUint64(b[:], e)
		_, err = w.Write(b[:])
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = file.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.fs.Rename(tmp, path)
	}
	if err != nil {
		_ = d.fs.Remove(tmp)
		return err
	}
	dir, err := d.fs.OpenDir(d.dir)
	if err != nil {
		return err
	}
	return errors.Join(dir.Sync(), dir.Close())
}

// loadSavedIdemSlots fills the empty filter from its file and returns the
// floor from which records must be replayed; ok is false, the filter
// unchanged, when there is no file or it does not check out (err says
// why, for the log).
func (d *DB) loadSavedIdemSlots() (floor uint64, ok bool, err error) {
	f := d.idemSlots.filter
	if f == nil {
		return 0, false, nil
	}
	file, err := d.fs.Open(d.fs.PathJoin(d.dir, idemFilterFile))
	if err != nil {
		return 0, false, nil // none saved
	}
	data, err := io.ReadAll(file)
	_ = file.Close()
	if err != nil {
		return 0, false, err
	}
	if len(data) < idemFileHead+4 || [8]byte(data[:8]) != idemFileMagic {
		return 0, false, errors.New("not a saved idempotency filter")
	}
	n := int(binary.LittleEndian.Uint32(data[24:]))
	if want := idemFileHead + 8*n + 4; len(data) != want {
		return 0, false, fmt.Errorf("saved idempotency filter of %d bytes, want %d", len(data), want)
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(data[len(body):]) {
		return 0, false, errors.New("saved idempotency filter fails its checksum")
	}
	floor = binary.LittleEndian.Uint64(data[16:])
	if !f.Restore(n, func(i int) uint64 { return binary.LittleEndian.Uint64(data[idemFileHead+8*i:]) }, floor) {
		return 0, false, nil // saved under another bound: rebuilt
	}
	d.idemSlots.seed.Store(binary.LittleEndian.Uint64(data[8:]))
	return floor, true, nil
}

// saveIdemSlotsEvery saves the filter every interval until stop is closed.
func (d *DB) saveIdemSlotsEvery(interval time.Duration, stop <-chan struct{}) {
	if <-d.idemSlots.ready; d.idemSlots.loadErr != nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := d.saveIdemSlots(); err != nil && d.log != nil {
				d.log.Warn("save the idempotency filter", "err", err)
			}
		}
	}
}

// stopSavingIdemSlots ends the periodic saves and waits for one under way.
func (d *DB) stopSavingIdemSlots() {
	if d.idemSaveStop != nil {
		close(d.idemSaveStop)
		<-d.idemSaveDone
		d.idemSaveStop = nil
	}
}
