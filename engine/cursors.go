package engine

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// Named cursors of the durable tail (contract section 14): the engine keeps
// their positions in storage and knows which connection holds each one, so
// a newer connection, a reset, a delete or a retention sweep can end it.

// Close codes and reasons of a cursor's connection.
const (
	CloseCursorTakenOver  = 4009
	ReasonCursorTakenOver = "cursor taken over"
	CloseCursorExpired    = 4010
	ReasonCursorExpired   = "cursor expired"
	// CloseCursorChanged (1012, "service restart": reconnect) ends a
	// connection whose cursor an admin reset or deleted.
	CloseCursorChanged   = 1012
	ReasonCursorReset    = "cursor reset"
	ReasonCursorDeleted  = "cursor deleted"
	MaxCursorsPerDataset = 1000
	// lagCountBudget bounds the keys one listing (or scrape) reads to count
	// lag_events: each cursor counts up to max(minLagCap, budget / cursors).
	lagCountBudget = 2_000_000
	minLagCap      = 2_000
)

// Errors of OpenCursor.
var (
	ErrCursorExpired    = errors.New("cursor expired")
	ErrTooManyCursors   = errors.New("too many cursors")
	errCursorNameFormat = "must be 1-64 characters of A-Z, a-z, 0-9, _, . and -"
)

// CursorConn is a connection consuming a named cursor (the HTTP layer's).
type CursorConn interface {
	// Start gives the connection the cursor's stored state; OpenCursor
	// calls it before registering the connection, so CursorState never
	// reports a position the connection has not loaded.
	Start(cur storage.Cursor)
	// CursorState returns the position acknowledged and the highest id
	// sent so far; called under the registry's lock, it must not block.
	CursorState() (position, delivered storage.ID)
	// CloseCursor ends the connection with a close frame; it must not block.
	CloseCursor(code int, reason string)
}

type cursorKey struct {
	ds   uint32
	name string
}

type cursorEntry struct {
	conn      CursorConn
	projectID string
	env       string
}

// cursorRegistry is the set of connected cursors. Every write of a cursor
// record happens under mu, and a connection's writes only while it is the
// registered one: a reset, delete, expiry or takeover unregisters it first,
// so a late write of the old connection cannot undo them.
type cursorRegistry struct {
	mu    sync.Mutex
	conns map[cursorKey]*cursorEntry
}

// ValidCursorName reports whether name is 1-64 of [A-Za-z0-9_.-].
func ValidCursorName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Settled is the id at or below which every event is committed for good:
// a cursor delivers nothing above it (ids.Horizon says why).
func (e *Engine) Settled() storage.ID { return storage.ID(e.horizon.Settled()) }

// OpenCursor registers c as the connection of p's cursor name, taking it
// over from an older connection (closed with 4009), and returns the
// cursor. A cursor that does not exist is created at the head: it
// delivers what is committed from now on. An expired cursor returns
// ErrCursorExpired and is not registered.
func (e *Engine) OpenCursor(p *Principal, name string, c CursorConn) (storage.Cursor, error) {
	r := &e.cursors
	k := cursorKey{p.dataset, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		r.conns = make(map[cursorKey]*cursorEntry)
	}
	if old := r.conns[k]; old != nil {
		// Keep what the old connection acknowledged, so the new one does
		// not redeliver it.
		pos, del := old.conn.CursorState()
		if err := e.saveCursorLocked(k, pos, del, false); err != nil {
			return storage.Cursor{}, err
		}
		delete(r.conns, k)
		old.conn.CloseCursor(CloseCursorTakenOver, ReasonCursorTakenOver)
	}
	cur, err := e.db.GetCursor(k.ds, name)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		cs, err := e.db.ListCursors(k.ds, MaxCursorsPerDataset)
		if err != nil {
			return cur, err
		}
		if len(cs) >= MaxCursorsPerDataset {
			return cur, ErrTooManyCursors
		}
		head := e.Settled()
		cur = storage.Cursor{Name: name, Position: head, Delivered: head, UpdatedAt: time.Now().UnixMilli()}
		if err := e.db.PutCursor(k.ds, &cur, true); err != nil {
			return cur, err
		}
	case err != nil:
		return cur, err
	}
	if cur.Expired {
		return cur, ErrCursorExpired
	}
	c.Start(cur)
	r.conns[k] = &cursorEntry{conn: c, projectID: p.rec.ProjectID, env: p.rec.Environment}
	return cur, nil
}

// ConnectedCursor returns the connection holding p's cursor name, nil if
// none does; ErrNotFound when the cursor does not exist.
func (e *Engine) ConnectedCursor(p *Principal, name string) (CursorConn, error) {
	r := &e.cursors
	k := cursorKey{p.dataset, name}
	r.mu.Lock()
	ent := r.conns[k]
	r.mu.Unlock()
	if ent != nil {
		return ent.conn, nil
	}
	if _, err := e.db.GetCursor(k.ds, name); errors.Is(err, storage.ErrNotFound) {
		return nil, ErrNotFound
	} else if err != nil {
		return nil, err
	}
	return nil, nil
}

// SaveCursor writes the position and delivered mark of c's cursor if c
// still holds it; sync is false for acknowledgements (a lost write only
// redelivers) and true at disconnect.
func (e *Engine) SaveCursor(p *Principal, name string, c CursorConn, position, delivered storage.ID, sync bool) error {
	r := &e.cursors
	k := cursorKey{p.dataset, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ent := r.conns[k]; ent == nil || ent.conn != c {
		return nil // taken over, reset, deleted or expired meanwhile
	}
	return e.saveCursorLocked(k, position, delivered, sync)
}

// CloseCursor saves c's final state and unregisters it, if it still holds the cursor.
func (e *Engine) CloseCursor(p *Principal, name string, c CursorConn, position, delivered storage.ID) error {
	r := &e.cursors
	k := cursorKey{p.dataset, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ent := r.conns[k]; ent == nil || ent.conn != c {
		return nil
	}
	delete(r.conns, k)
	return e.saveCursorLocked(k, position, delivered, true)
}

func (e *Engine) saveCursorLocked(k cursorKey, position, delivered storage.ID, sync bool) error {
	cur := storage.Cursor{Name: k.name, Position: position, Delivered: delivered, UpdatedAt: time.Now().UnixMilli()}
	return e.db.PutCursor(k.ds, &cur, sync)
}

// CursorInfo is a cursor as the admin API lists it.
type CursorInfo struct {
	Name       string  `json:"name"`
	Position   string  `json:"position"`
	LagEvents  int     `json:"lag_events"`
	LagSeconds float64 `json:"lag_seconds"`
	Connected  bool    `json:"connected"`
	Expired    bool    `json:"expired"`
}

// ListCursors lists a project environment's cursors with their lag behind
// the head: lag_events counts the events after the position (up to a cap
// that keeps one listing to about lagCountBudget key reads), lag_seconds
// is the age of the oldest of them.
func (e *Engine) ListCursors(projectID, env string) ([]CursorInfo, error) {
	_, ds, err := e.dataset(projectID, env)
	if err != nil {
		return nil, err
	}
	cs, err := e.db.ListCursors(ds, MaxCursorsPerDataset)
	if err != nil {
		return nil, err
	}
	limit := max(minLagCap, lagCountBudget/max(1, len(cs)))
	head := e.Settled()
	now := time.Now()
	out := make([]CursorInfo, 0, len(cs))
	for i := range cs {
		c := &cs[i]
		connected := false
		e.cursors.mu.Lock()
		if ent := e.cursors.conns[cursorKey{ds, c.Name}]; ent != nil {
			connected = true
			c.Position, _ = ent.conn.CursorState()
		}
		e.cursors.mu.Unlock()
		info, err := e.cursorLag(ds, c.Position, head, limit, now)
		if err != nil {
			return nil, err
		}
		info.Name, info.Connected, info.Expired = c.Name, connected, c.Expired
		out = append(out, info)
	}
	return out, nil
}

// cursorLag counts the events after position up to head (at most limit)
// and the age of the first one.
func (e *Engine) cursorLag(ds uint32, position, head storage.ID, limit int, now time.Time) (CursorInfo, error) {
	info := CursorInfo{Position: ids.FormatEvent(position)}
	n, _, err := e.db.CountEventsAfter(ds, position, head, limit)
	if err != nil || n == 0 {
		return info, err
	}
	info.LagEvents = n
	first, ok, err := e.db.FirstEventAfter(ds, position)
	if err != nil || !ok {
		return info, err
	}
	info.LagSeconds = max(0, float64(now.UnixMilli()-ids.Time(first.ID))/1000)
	return info, nil
}

// DeleteCursor deletes a cursor, closing its connection (1012 cursor deleted).
func (e *Engine) DeleteCursor(projectID, env, name string) error {
	_, ds, err := e.dataset(projectID, env)
	if err != nil {
		return err
	}
	r := &e.cursors
	k := cursorKey{ds, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	ent := r.conns[k]
	if _, err := e.db.GetCursor(ds, name); errors.Is(err, storage.ErrNotFound) && ent == nil {
		return ErrNotFound
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if ent != nil {
		delete(r.conns, k)
		ent.conn.CloseCursor(CloseCursorChanged, ReasonCursorDeleted)
	}
	return e.db.DeleteCursor(ds, name)
}

// ResetCursor moves a cursor (creating it if needed) to "head", after an
// event id, or before the first event recorded at or after an RFC 3339
// time; it clears an expiry and closes the connection (1012 cursor reset).
func (e *Engine) ResetCursor(projectID, env, name, to string) (CursorInfo, error) {
	_, ds, err := e.dataset(projectID, env)
	if err != nil {
		return CursorInfo{}, err
	}
	if !ValidCursorName(name) {
		return CursorInfo{}, invalid("name", errCursorNameFormat)
	}
	pos, err := e.resetPosition(to)
	if err != nil {
		return CursorInfo{}, err
	}
	r := &e.cursors
	k := cursorKey{ds, name}
	r.mu.Lock()
	if ent := r.conns[k]; ent != nil {
		delete(r.conns, k)
		ent.conn.CloseCursor(CloseCursorChanged, ReasonCursorReset)
	} else if _, err := e.db.GetCursor(ds, name); errors.Is(err, storage.ErrNotFound) {
		cs, err := e.db.ListCursors(ds, MaxCursorsPerDataset)
		if err == nil && len(cs) >= MaxCursorsPerDataset {
			err = invalid("name", "a dataset holds at most 1000 cursors")
		}
		if err != nil {
			r.mu.Unlock()
			return CursorInfo{}, err
		}
	}
	err = e.saveCursorLocked(k, pos, pos, true)
	r.mu.Unlock()
	if err != nil {
		return CursorInfo{}, err
	}
	info, err := e.cursorLag(ds, pos, e.Settled(), lagCountBudget, time.Now())
	info.Name = name
	return info, err
}

func (e *Engine) resetPosition(to string) (storage.ID, error) {
	switch {
	case to == "head":
		return e.Settled(), nil
	case strings.HasPrefix(to, ids.EventPrefix):
		id, err := ids.ParseEvent(to)
		if err != nil {
			return storage.ID{}, invalid("to", `must be "head", an event id or an RFC 3339 time`)
		}
		return storage.ID(id), nil
	}
	t, err := time.Parse(time.RFC3339Nano, to)
	if err != nil {
		return storage.ID{}, invalid("to", `must be "head", an event id or an RFC 3339 time`)
	}
	return idBefore(t.UnixMilli()), nil
}

// idBefore is the greatest id below every id recorded at ms or later.
func idBefore(ms int64) storage.ID {
	var id storage.ID
	if ms <= 0 {
		return id
	}
	ms--
	for i := 5; i >= 0; i-- {
		id[i] = byte(ms)
		ms >>= 8
	}
	for i := 6; i < 16; i++ {
		id[i] = 0xff
	}
	return id
}

// forgetCursors unregisters the connected cursors of datasets about to be
// deleted, so their connections' last saves are ignored.
func (e *Engine) forgetCursors(dss ...uint32) {
	r := &e.cursors
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.conns {
		for _, ds := range dss {
			if k.ds == ds {
				delete(r.conns, k)
			}
		}
	}
}

// expireCursors runs before a retention sweep of ds at cutoff deletes
// events: every cursor whose position is before the last id to go is
// marked expired (durably, first: a crash in the sweep must not leave a
// cursor that skips) and its connection closed with 4010.
func (e *Engine) expireCursors(ds uint32, cutoff int64) error {
	maxID, ok, err := e.db.MaxIDBefore(ds, cutoff)
	if err != nil || !ok {
		return err
	}
	r := &e.cursors
	r.mu.Lock()
	defer r.mu.Unlock()
	// Connected cursors: save their in-memory position first, so one that
	// is ahead of the sweep in memory is not expired for a stale record.
	for k, ent := range r.conns {
		if k.ds != ds {
			continue
		}
		pos, del := ent.conn.CursorState()
		if bytes.Compare(pos[:], maxID[:]) >= 0 {
			if err := e.saveCursorLocked(k, pos, del, false); err != nil {
				return err
			}
		}
	}
	names, err := e.db.ExpireCursors(ds, maxID, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	for _, n := range names {
		k := cursorKey{ds, n}
		if ent := r.conns[k]; ent != nil {
			delete(r.conns, k)
			ent.conn.CloseCursor(CloseCursorExpired, ReasonCursorExpired)
		}
	}
	if len(names) > 0 {
		e.log.Info("retention expired cursors", "dataset", ds, "cursors", len(names))
	}
	return nil
}
