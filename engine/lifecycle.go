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
	importChunk      = 2000
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
	e       *Engine
	ps      *projectState
	ds      uint32
	scope   string // idempotency scope: imports have no API key
	res     ImportResult
	pending []actors.Pending
	// ids and keys seen in the current chunk; earlier chunks are in Pebble.
	ids  map[storage.ID]bool
	keys map[string]uint64
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
	im := &importer{e: e, ps: ps, ds: ds, scope: "import/" + projectID + "/" + env,
		ids: make(map[storage.ID]bool), keys: make(map[string]uint64), res: ImportResult{Errors: []ImportReject{}}}
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
		if len(im.pending) >= importChunk {
			if err := im.flush(); err != nil {
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
		return im.res, err
	}
	if err := im.flush(); err != nil {
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
		has, err := im.e.db.HasEvent(im.ds, id)
		if im.ids[id] || (err == nil && has) {
			im.res.Duplicates++
			return
		}
		im.ids[id] = true
	}
	if in.IdempotencyKey != "" {
		if h, ok := im.keys[in.IdempotencyKey]; ok {
			im.idemSeen(n, h, in.Hash)
			return
		}
		if rec, err := im.e.db.GetIdempotency(im.scope, in.IdempotencyKey); err == nil {
			im.idemSeen(n, rec.Hash, in.Hash)
			return
		}
		im.keys[in.IdempotencyKey] = in.Hash
	}
	ts, created := now, now
	if in.HasTimestamp {
		ts = in.Timestamp
	}
	if in.HasCreatedAt {
		created = in.CreatedAt
	}
	im.pending = append(im.pending, actors.Pending{
		Event: storage.Event{ID: id, Name: in.Name, VisitorID: in.VisitorID, HasVisitor: in.HasVisitor,
			Timestamp: ts, CreatedAt: created, Properties: in.Properties},
		IdemKey: in.IdempotencyKey, Hash: in.Hash,
	})
}

func (im *importer) idemSeen(line int, old, hash uint64) {
	if old == hash {
		im.res.Duplicates++
		return
	}
	im.reject(line, &event.Problem{Code: "idempotency_conflict",
		Message: "This idempotency_key was already used with a different event"})
}

// flush commits the pending chunk durably and tells the broadcaster.
func (im *importer) flush() error {
	if len(im.pending) == 0 {
		return nil
	}
	b := im.e.db.NewBatch()
	defer b.Close()
	now := time.Now().UnixMilli()
	done := make([]actors.CommittedEvent, 0, len(im.pending))
	for i := range im.pending {
		p := &im.pending[i]
		if p.Event.ID == (storage.ID{}) {
			p.Event.ID, _ = im.e.ids.Next()
		}
		b.AddEvent(im.ds, &p.Event)
		if p.IdemKey != "" {
			b.AddIdempotency(im.scope, p.IdemKey, storage.IdemRecord{Hash: p.Hash, ID: p.Event.ID, Timestamp: p.Event.Timestamp, CreatedAt: now})
		}
		done = append(done, actors.CommittedEvent{Dataset: im.ds, Event: &p.Event})
	}
	if err := b.Commit(true); err != nil {
		return err
	}
	im.res.Accepted += len(im.pending)
	im.e.system.Root.Send(im.e.bcast, &actors.Committed{Events: done})
	im.pending = nil
	clear(im.ids)
	clear(im.keys)
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
// dir must not exist or be empty.
func (e *Engine) Backup(dir string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return invalid("dir", "must be an absolute path on the server's machine")
	}
	return e.db.Checkpoint(filepath.Join(dir, "pebble"))
}
