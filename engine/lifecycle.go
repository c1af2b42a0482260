package engine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// Import limits: a line holds one event (properties are at most 32 KiB, so
// 1 MiB is generous), and a chunk of lines is committed at once.
const (
	maxImportLine    = 1 << 20
	importChunkSize  = 2000
	maxImportRejects = 1000
)

// ImportReject is one refused line of an import.
type ImportReject struct {
	Line    int               `json:"line"`
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Details map[string]string `json:"details,omitempty"`
}

// ImportResult summarises an import.
type ImportResult struct {
	Lines      int            `json:"lines"` // non-blank lines, each one event
	Accepted   int            `json:"accepted"`
	Duplicates int            `json:"duplicates"` // already stored: same id, or same idempotency key and content
	Rejected   int            `json:"rejected"`
	Errors     []ImportReject `json:"errors"` // the first 1,000 rejects
	Truncated  bool           `json:"errors_truncated"`
}

// dataset resolves a project's dataset for an environment.
func (e *Engine) dataset(projectID, env string) (*projectState, uint32, error) {
	ps, err := e.project(projectID)
	if err != nil {
		return nil, 0, err
	}
	switch env {
	case Live, "":
		return ps, ps.rec.Load().Datasets[0], nil
	case Test:
		return ps, ps.rec.Load().Datasets[1], nil
	}
	return nil, 0, invalid("environment", "must be live or test")
}

// importer holds one import's state between chunks.
type importer struct {
	e     *Engine
	ps    *projectState
	ds    uint32
	scope string // idempotency scope: imports have no API key
	res   ImportResult
	// cur is the chunk being decoded; prev the chunk being committed
	// meanwhile (nil when none), so decoding and fsync overlap.
	cur, prev *importChunk
	done      chan error
	// idem reads the store's idempotency keys for the current chunk, opened
	// at its first key: every chunk before prev is committed by then, and
	// prev's keys are in its map.
	idem *storage.IdemLookup
}

// importChunk is a set of events committed in one batch, with the ids and
// idempotency keys it holds, which later lines must see before Pebble does.
type importChunk struct {
	pending []actors.Pending
	ids     map[storage.ID]bool
	keys    map[string]uint64
}

func newImportChunk() *importChunk {
	return &importChunk{ids: make(map[storage.ID]bool), keys: make(map[string]uint64)}
}

// Import reads NDJSON events (as sent to the API, or as exported: with id
// and created_at) and stores them with no plan limit. Lines are validated
// like API requests; a line whose id is already stored, or whose
// idempotency_key was already imported with the same content, is counted as
// a duplicate, so re-running an import adds nothing. progress, if not nil,
// is called after each committed chunk with the lines read so far.
func (e *Engine) Import(projectID, env string, r io.Reader, progress func(lines int)) (ImportResult, error) {
	ps, ds, err := e.dataset(projectID, env)
	if err != nil {
		return ImportResult{}, err
	}
	// A large job: look at the volume now rather than up to a second ago.
	if err := e.checkDisk(); err != nil {
		return ImportResult{}, err
	}
	im := &importer{e: e, ps: ps, ds: ds, scope: "import/" + projectID + "/" + env,
		cur: newImportChunk(), res: ImportResult{Errors: []ImportReject{}}}
	defer im.closeIdem()
	br := bufio.NewReaderSize(r, 256<<10)
	var line []byte
	physical := 0 // line numbers in reports count blank lines too, as editors do
	for {
		var tooLong bool
		line, tooLong, err = readLine(br, line[:0])
		if len(line) == 0 && err != nil {
			break
		}
		physical++
		switch {
		case tooLong:
			im.res.Lines++
			im.reject(physical, &event.Problem{Code: "payload_too_large", Message: "line longer than 1 MiB"})
		case len(bytes.TrimSpace(line)) > 0:
			im.res.Lines++
			im.add(physical, line)
		}
		if len(im.cur.pending) >= importChunkSize {
			if err := im.flush(false); err != nil {
				return im.res, err
			}
			if progress != nil {
				progress(im.res.Lines)
			}
		}
		if err != nil {
			break
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		_ = im.wait() // what was sent is committed; report it
		return im.res, err
	}
	if err := im.flush(true); err != nil {
		return im.res, err
	}
	if progress != nil {
		progress(im.res.Lines)
	}
	return im.res, nil
}

// readLine reads up to and without '\n'; a line over the limit is drained
// and reported as too long instead of growing without bound.
func readLine(br *bufio.Reader, buf []byte) ([]byte, bool, error) {
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			buf = append(buf, chunk...)
			if len(buf) > maxImportLine {
				tooLong, buf = true, buf[:0]
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		if tooLong {
			buf = append(buf[:0], 'x') // non-empty: the caller counts the line
		}
		return buf, tooLong, err
	}
}

func (im *importer) reject(line int, p *event.Problem) {
	im.res.Rejected++
	if len(im.res.Errors) >= maxImportRejects {
		im.res.Truncated = true
		return
	}
	im.res.Errors = append(im.res.Errors, ImportReject{Line: line, Error: p.Code, Message: p.Message, Details: p.Details})
}

func (im *importer) add(n int, line []byte) {
	now := time.Now().UnixMilli()
	in, prob := event.DecodeImport(line)
	if prob == nil {
		var def *event.Definition
		if defs := im.ps.definitions.Load(); defs != nil {
			def = (*defs)[in.Name]
		}
		prob = event.Validate(&in, def, now)
	}
	if prob == nil && in.HasVisitor && im.ps.isSuppressed(im.ds, in.VisitorID) {
		prob = &event.Problem{Status: 422, Code: "validation_error", Message: "Validation failed",
			Details: map[string]string{"visitor_id": "this visitor was erased and its events are refused"}}
	}
	var id storage.ID
	if prob == nil && in.ID != "" {
		parsed, err := ids.ParseEvent(in.ID)
		if err != nil {
			prob = &event.Problem{Status: 400, Code: "bad_request", Message: "Invalid request data",
				Details: map[string]string{"id": "must be an event id (evt_ and 26 characters)"}}
		}
		id = parsed
	}
	if prob != nil {
		im.reject(n, prob)
		return
	}
	if in.ID != "" {
		if im.seenID(id) {
			im.res.Duplicates++
			return
		}
		im.cur.ids[id] = true
	}
	if in.IdempotencyKey != "" {
		if h, ok := im.seenKey(in.IdempotencyKey, now); ok {
			im.idemSeen(n, h, &in)
			return
		}
		im.cur.keys[in.IdempotencyKey] = in.Hash
	}
	ts, created := now, now
	if in.HasTimestamp {
		ts = in.Timestamp
	}
	if in.HasCreatedAt {
		created = in.CreatedAt
	}
	im.cur.pending = append(im.cur.pending, actors.Pending{
		Event: storage.Event{ID: id, Name: in.Name, VisitorID: in.VisitorID, HasVisitor: in.HasVisitor,
			Timestamp: ts, CreatedAt: created, Properties: in.Properties, Numbers: in.Numbers},
		IdemKey: in.IdempotencyKey, Hash: in.Hash, AtReceipt: !in.HasTimestamp,
	})
}

func (im *importer) idemSeen(line int, old uint64, in *event.Input) {
	c := in.Content()
	if actors.SameContent(old, in.Hash, &c) {
		im.res.Duplicates++
		return
	}
	im.reject(line, &event.Problem{Code: "idempotency_conflict",
		Message: "This idempotency_key was already used with a different event"})
}

// seenID reports an id in this chunk, the one being committed, or the store.
func (im *importer) seenID(id storage.ID) bool {
	if im.cur.ids[id] || (im.prev != nil && im.prev.ids[id]) {
		return true
	}
	has, err := im.e.db.HasEvent(im.ds, id)
	return err == nil && has
}

// seenKey finds an idempotency key in this chunk, the one being committed, or the store.
func (im *importer) seenKey(key string, now int64) (uint64, bool) {
	if h, ok := im.cur.keys[key]; ok {
		return h, true
	}
	if im.prev != nil {
		if h, ok := im.prev.keys[key]; ok {
			return h, true
		}
	}
	if im.idem == nil {
		l, err := im.e.db.NewIdemLookup()
		if err != nil {
			return 0, false // as a failed Get was before: the line is stored
		}
		im.idem = l
	}
	// A record past its 24 hours is forgotten even before the hourly sweep
	// deletes it, as the key actor does for the API's keys.
	if rec, err := im.idem.Get(im.scope, key); err == nil && actors.IdempotencyLive(rec.CreatedAt, now) {
		return rec.Hash, true
	}
	return 0, false
}

// closeIdem releases the current chunk's lookup, so the next chunk's sees
// what was committed since.
func (im *importer) closeIdem() {
	if im.idem != nil {
		_ = im.idem.Close()
		im.idem = nil
	}
}

// flush hands the current chunk to a committing goroutine, after the
// previous one finished; last waits for this one too.
func (im *importer) flush(last bool) error {
	im.closeIdem()
	if err := im.wait(); err != nil {
		return err
	}
	if len(im.cur.pending) > 0 {
		if err := im.e.writeGate(); err != nil {
			return err // what was committed stays; the result says how much
		}
	}
	if len(im.cur.pending) > 0 {
		chunk := im.cur
		im.prev, im.done = chunk, make(chan error, 1)
		im.cur = newImportChunk()
		go func() { im.done <- im.commit(chunk) }()
	}
	if last {
		return im.wait()
	}
	return nil
}

// wait collects the chunk being committed, if any.
func (im *importer) wait() error {
	if im.prev == nil {
		return nil
	}
	err := <-im.done
	if err == nil {
		im.res.Accepted += len(im.prev.pending)
	}
	im.prev = nil
	return err
}

// commit writes a chunk durably and tells the broadcaster. It runs beside
// the decoding of the next chunk and touches nothing but its own chunk.
func (im *importer) commit(c *importChunk) error {
	b := im.e.db.NewBatch()
	defer b.Close()
	// Cursors must not pass the ids made here before they are committed.
	hold := im.e.horizon.Hold()
	defer hold.Release()
	now := time.Now().UnixMilli()
	done := make([]actors.CommittedEvent, 0, len(c.pending))
	// An id for every event; lines of an export keep theirs and leave
	// theirs unused, a gap in the sequence that costs nothing.
	block := im.e.ids.Reserve(len(c.pending))
	for i := range c.pending {
		p := &c.pending[i]
		if p.Event.ID == (storage.ID{}) {
			var ms int64
			p.Event.ID, ms = block.Next()
			if p.AtReceipt { // as the shards do: no Z key
				p.Event.Timestamp = ms
			}
		}
		b.AddEvent(im.ds, &p.Event)
		if p.IdemKey != "" {
			b.AddIdempotency(im.scope, p.IdemKey, storage.IdemRecord{Hash: p.Hash, ID: p.Event.ID, Timestamp: p.Event.Timestamp, CreatedAt: now})
		}
		done = append(done, actors.CommittedEvent{Dataset: im.ds, Event: &p.Event})
	}
	if err := b.Commit(true); err != nil {
		return storageError(err)
	}
	im.e.system.Root.Send(im.e.bcast, &actors.Committed{Events: done})
	return nil
}

// Export calls fn for every event of a project's environment with a
// timestamp in [from, to], oldest first, until fn returns false.
func (e *Engine) Export(projectID, env string, from, to int64, fn func(*storage.Event) bool) error {
	_, ds, err := e.dataset(projectID, env)
	if err != nil {
		return err
	}
	return e.db.ScanEvents(ds, from, to, fn)
}

// Backup writes a consistent online snapshot of the store to dir/pebble;
// dir must not exist or be empty, and must not be inside the data directory
// or on a pseudo-filesystem (checkBackupDir).
func (e *Engine) Backup(dir string) error {
	if msg := checkBackupDir(dir, e.cfg.DataDir, e.cfg.DataRoot); msg != "" {
		return invalid("dir", msg)
	}
	// Not refused on a short disk (the target may be another volume, and a
	// backup is a way out), but the guard looks at the volume first.
	if g := e.cfg.Disk; g != nil {
		g.Check()
	}
	return e.db.Checkpoint(filepath.Join(dir, "pebble"))
}
