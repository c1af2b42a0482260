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
// record's key: 0.5-0.8 µs a key, 35-55 s at the default bound, which
// keyed writes wait for.
//
// A save raises each table's floor, the lowest slot it takes, to its
// clock less idemSaveMargin, then copies the table, one table after the
// other. Every key inserted after a table's copy is of a slot at or above
// the floor, and a record of an earlier slot goes to the day layout
// instead, so the copies and the records from the floor on find every
// record. The file is derived data:
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
// eleven minutes of keyed writes. A save copies each table (61 ms for the
// largest, holding its keyed writes) and writes it.
const DefaultIdempotencyFilterSave = 10 * time.Minute

// idemFileMagic starts the file; the version is its last byte: 5 since
// the filter may be several tables. A save of version 4, one table, is
// read into a filter of one. One of version 1 (seconds), 2 (a build of
// session 30, seconds in 17 bits) or 3 (buckets of four: its entries would
// be read into the wrong buckets) is not read: a start rebuilds from the
// records, once.
var idemFileMagic = [8]byte{'e', 'v', 'i', 'd', 'f', 'l', 't', 5}

// idemFileV4 is the version whose file has one table and no count of
// tables.
const idemFileV4 = 4

// idemFileHead is the file's bytes before the entries: magic, seed,
// floor, and the number of tables (version 4: the one table's size).
const idemFileHead = 8 + 8 + 8 + 4

// idemFileMaxTables bounds the tables a file may say it holds, so that a
// damaged count allocates nothing much before the checksum fails.
const idemFileMaxTables = 1 << 16

// idemSaveBytesPerSync is how much of a save is written before the
// kernel is asked to write it back (sync_file_range): the writer's buffer.
const idemSaveBytesPerSync = 1 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// saveIdemSlots writes the filter to its file: magic, seed, floor, the
// number of tables, the entries of each table in turn, each table's
// number of entries (known once Save has copied it), then a CRC-32C of
// all of it, little-endian; written under another name, synced and
// renamed over the last.
func (d *DB) saveIdemSlots() error {
	f := d.idemSlots.filter
	if f == nil || d.readOnly {
		return nil
	}
	floor := idemSlot(d.now().UnixMilli()) - idemSaveMargin
	path := d.fs.PathJoin(d.dir, idemFilterFile)
	tmp := path + ".tmp"
	file, err := d.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	// Written back a megabyte at a time as it goes, not all at the Sync:
	// the final fsync of a 512 MiB save held fdatasyncs of another file
	// beside it up to 281-314 ms (p99.9 132-171 ms), written back as it
	// goes 58-70 ms (34-45; BenchmarkIdemSaveBesideSyncs).
	file = vfs.NewSyncingFile(file, vfs.SyncingFileOptions{BytesPerSync: idemSaveBytesPerSync})
	crc := crc32.New(crcTable)
	w := bufio.NewWriterSize(io.MultiWriter(file, crc), idemSaveBytesPerSync)
	var head [idemFileHead]byte
	copy(head[:], idemFileMagic[:])
	binary.LittleEndian.PutUint64(head[8:], d.idemSlots.seed.Load())
	binary.LittleEndian.PutUint64(head[16:], floor)
	binary.LittleEndian.PutUint32(head[24:], uint32(f.Tables()))
	_, err = w.Write(head[:])
	var sizes []byte
	var b [8]byte
	if err == nil {
		err = f.Save(floor, func(entries []uint64) error {
			sizes = binary.LittleEndian.AppendUint32(sizes, uint32(len(entries)))
			for _, e := range entries {
				binary.LittleEndian.PutUint64(b[:], e)
				if _, err := w.Write(b[:]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err == nil {
		_, err = w.Write(sizes)
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

// idemFileLayout is what a saved filter says of itself: the seed, the
// floor and each table's number of entries.
type idemFileLayout struct {
	seed, floor uint64
	sizes       []int
}

// readIdemFileLayout reads the layout of a saved filter of size bytes and
// checks that the file is as long as it says and its checksum holds.
func readIdemFileLayout(file io.ReaderAt, size int64) (idemFileLayout, error) {
	var l idemFileLayout
	head := make([]byte, idemFileHead)
	if _, err := file.ReadAt(head, 0); err != nil || [7]byte(head[:7]) != [7]byte(idemFileMagic[:7]) {
		return l, errors.New("not a saved idempotency filter")
	}
	l.seed, l.floor = binary.LittleEndian.Uint64(head[8:]), binary.LittleEndian.Uint64(head[16:])
	count := binary.LittleEndian.Uint32(head[24:])
	want := int64(idemFileHead + 4)
	switch v := head[7]; {
	case v == idemFileV4:
		l.sizes = []int{int(count)}
	case v != idemFileMagic[7]:
		return l, fmt.Errorf("saved idempotency filter of version %d, want %d", v, idemFileMagic[7])
	case count == 0 || count > idemFileMaxTables || size < want+4*int64(count):
		return l, fmt.Errorf("saved idempotency filter of %d tables in %d bytes", count, size)
	default:
		sizes := make([]byte, 4*count)
		if _, err := file.ReadAt(sizes, size-4-int64(len(sizes))); err != nil {
			return l, err
		}
		for i := range count {
			l.sizes = append(l.sizes, int(binary.LittleEndian.Uint32(sizes[4*i:])))
		}
		want += int64(len(sizes))
	}
	for _, n := range l.sizes {
		want += 8 * int64(n)
	}
	if size != want {
		return l, fmt.Errorf("saved idempotency filter of %d bytes, want %d", size, want)
	}
	crc := crc32.New(crcTable)
	if _, err := io.Copy(crc, io.NewSectionReader(file, 0, size-4)); err != nil {
		return l, err
	}
	sum := make([]byte, 4)
	if _, err := file.ReadAt(sum, size-4); err != nil {
		return l, err
	}
	if crc.Sum32() != binary.LittleEndian.Uint32(sum) {
		return l, errors.New("saved idempotency filter fails its checksum")
	}
	return l, nil
}

// loadSavedIdemSlots fills the empty filter from its file and returns the
// floor from which records must be replayed; ok is false, the filter
// unchanged, when there is no file or it does not check out (err says
// why, for the log). The file is read twice, for its checksum and then
// into the filter, so that it is never in memory whole beside the tables.
func (d *DB) loadSavedIdemSlots() (floor uint64, ok bool, err error) {
	f := d.idemSlots.filter
	if f == nil {
		return 0, false, nil
	}
	file, err := d.fs.Open(d.fs.PathJoin(d.dir, idemFilterFile))
	if err != nil {
		return 0, false, nil // none saved
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return 0, false, err
	}
	l, err := readIdemFileLayout(file, st.Size())
	if err != nil {
		return 0, false, err
	}
	entries := 0
	for _, n := range l.sizes {
		entries += n
	}
	r := savedEntries{r: io.NewSectionReader(file, idemFileHead, 8*int64(entries)), left: 8 * entries}
	if !f.Restore(l.sizes, r.next, l.floor) {
		return 0, false, nil // saved under another bound: rebuilt
	}
	d.idemSlots.seed.Store(l.seed)
	return l.floor, true, nil
}

// savedEntries reads a saved filter's entries, left bytes of them, a
// megabyte at a time: a read of eight bytes each took 16 ns an entry.
type savedEntries struct {
	r         io.Reader
	left, pos int
	buf       []byte
}

// next is the next entry; false if it cannot be read.
func (e *savedEntries) next() (uint64, bool) {
	if e.pos == len(e.buf) {
		n := min(e.left, 1<<20)
		if n == 0 {
			return 0, false
		}
		if e.buf == nil {
			e.buf = make([]byte, n)
		}
		e.buf, e.pos = e.buf[:n], 0
		if _, err := io.ReadFull(e.r, e.buf); err != nil {
			return 0, false
		}
		e.left -= n
	}
	e.pos += 8
	return binary.LittleEndian.Uint64(e.buf[e.pos-8:]), true
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
