package actors

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// IdempotencyTTL is how long an idempotency key is remembered.
const IdempotencyTTL = 24 * time.Hour

// IdempotencyLive reports whether a record created at createdMs (Unix ms)
// is still remembered at nowMs: the hourly sweep deletes it later.
func IdempotencyLive(createdMs, nowMs int64) bool {
	return time.Duration(nowMs-createdMs)*time.Millisecond < IdempotencyTTL
}

// KeyConfig is what a key actor knows of its API key. The engine owns it.
type KeyConfig struct {
	ID string
	// Limits returns the key's current standard limits; the project's plan can change at any time.
	Limits func() ratelimit.Limits
	// LastUsed is the Unix ms of the last counted request, read by the admin API.
	LastUsed *atomic.Int64
	// Alerts returns the usage-alert rules of the key's project (rules naming
	// other keys included: the actor skips them); nil when alerts are not wired.
	Alerts func() []AlertRule
	// OnAlert is told when an admitted request makes a window reach a rule's
	// threshold; it runs in the key actor and must not block.
	OnAlert func(UsageAlert)
	// BlockedUntil holds, per bucket kind, the Unix second before which the
	// bucket refuses every request (0: it has room), as of the actor's last
	// decision. The HTTP layer reads it to answer 429 before reading a body;
	// a stale value only sends the request to the actor, which decides.
	BlockedUntil [3]atomic.Int64
}

// idemDone tells a key actor that a shard settled some of its idempotency
// keys, by their hashes.
type idemDone struct{ hashes []uint64 }

// idemReady tells a key actor that the store's idempotency filter is
// rebuilt after a start (storage.DB.IdempotencyReady).
type idemReady struct{}

// persistTick asks a key actor to save its windows if they changed.
type persistTick struct{}

// NotInfluenceReceiveTimeout keeps ticks from keeping an idle actor alive.
func (persistTick) NotInfluenceReceiveTimeout() {}

type blocked struct {
	req *Request
	rep *Reply
}

// keyActor serialises everything about one API key, so its windows and
// idempotency keys need no locks.
type keyActor struct {
	cfg     *KeyConfig
	keys    *Keys
	buckets [3]*ratelimit.Bucket
	dirty   bool
	gone    bool // passivated: forward whatever still arrives
	next    uint32
	// inflight holds the hashes (storage.DB.IdempotencyHash) of the
	// idempotency keys sent to a shard and not yet committed; requests that
	// repeat one wait in waiting until it settles. Keyed by the hash, not
	// the key's text: maps of 28-60 character keys were 7% of eventd's CPU
	// for keyed batches (docs/benchmarks.md, session 36). Another key with
	// the same hash (odds 2^-64 a pair) waits too, then is looked up as usual.
	inflight map[uint64]struct{}
	waiting  map[uint64][]blocked
	// parked holds keyed writes that came before the store's idempotency
	// filter was rebuilt after a start; they are written once it is, and
	// the actor's other requests go on meanwhile.
	parked []blocked
	// local holds the hashes of a keyed write's idempotency keys, with the
	// index of the event that has each first, to find a key repeated within
	// the write; one map for every write, emptied after each (a map made
	// per write was a third of the key actor's CPU for a keyed batch).
	local map[uint64]int
	// hashes holds a keyed write's idempotency hashes for TouchIdempotency.
	hashes []uint64
	fired  map[string]int64 // usage-alert rule -> window period it last fired in
}

func (k *keyActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		k.load()
		ctx.SetReceiveTimeout(k.keys.idle)
	case *Request:
		if k.gone {
			k.keys.Send(k.cfg, m)
			return
		}
		k.handle(ctx, m)
	case *idemDone:
		k.settle(ctx, m.hashes)
	case idemReady:
		parked := k.parked
		k.parked = nil
		for _, b := range parked {
			k.write(ctx, b.req, b.rep)
		}
	case persistTick:
		k.persist()
	case *actor.ReceiveTimeout:
		if len(k.inflight) == 0 && len(k.parked) == 0 && !k.gone {
			k.gone = k.keys.passivate(k.cfg.ID, ctx.Self(), k.persist)
		}
	case *actor.Stopping:
		if !k.gone {
			k.persist()
		}
		stopped := func(list []blocked) {
			for _, b := range list {
				b.rep.Err = ErrStopped
				b.req.Reply <- b.rep
			}
		}
		for _, list := range k.waiting {
			stopped(list)
		}
		stopped(k.parked)
	}
}

func (k *keyActor) limits(kind ratelimit.Kind) ratelimit.Limits {
	switch kind {
	case ratelimit.Batch:
		return k.cfg.Limits().Tenth()
	case ratelimit.AnalyticsKind:
		return ratelimit.Analytics
	default:
		return k.cfg.Limits()
	}
}

func (k *keyActor) handle(ctx actor.Context, req *Request) {
	rep := &req.rep
	*rep = Reply{Allowed: true, req: req, spare: rep.spare}
	if req.Write != nil && k.keys.gate != nil {
		if err := k.keys.gate(); err != nil {
			k.refuse(req, rep, err)
			return
		}
	}
	if req.Kind != ratelimit.None {
		lim := k.limits(req.Kind)
		b := k.buckets[req.Kind]
		counted := req.Write == nil || !req.Write.Admitted
		if counted {
			rep.Allowed, rep.RetryAfter = b.Admit(req.Now, lim)
		}
		rep.Windows = append(rep.windowsBuf[:0], b.Status(req.Now, lim)...)
		k.publishBlocked(req.Kind, req.Now, b, lim)
		if rep.Allowed && counted {
			k.dirty = true
			k.cfg.LastUsed.Store(req.Now.UnixMilli())
			if req.Kind == ratelimit.Standard && k.cfg.Alerts != nil && k.cfg.OnAlert != nil {
				k.checkAlerts(req.Now, rep.Windows)
			}
		}
	}
	if req.Snapshot {
		for kind := range k.buckets {
			lim := k.limits(ratelimit.Kind(kind))
			rep.Buckets[kind] = append([]ratelimit.WindowStatus(nil), k.buckets[kind].Status(req.Now, lim)...)
		}
		if req.Kind == ratelimit.None {
			rep.Windows = rep.Buckets[ratelimit.Standard]
		}
	}
	if !rep.Allowed || req.Write == nil {
		req.Reply <- rep
		return
	}
	k.write(ctx, req, rep)
}

// refuse answers a write the engine does not accept now (a full disk): the
// rate limit is decided first, as for any request, so a client over its
// limit still gets 429; then the refusal, which counts in no window (the
// server's trouble is not the client's usage; docs/decisions.md).
func (k *keyActor) refuse(req *Request, rep *Reply, err error) {
	if req.Kind != ratelimit.None {
		lim := k.limits(req.Kind)
		b := k.buckets[req.Kind]
		rep.RetryAfter = b.Blocked(req.Now, lim)
		rep.Allowed = rep.RetryAfter == 0
		rep.Windows = append(rep.windowsBuf[:0], b.Status(req.Now, lim)...)
	}
	if rep.Allowed {
		rep.Err = err
	}
	req.Reply <- rep
}

// publishBlocked stores when the bucket has room again, for readers outside
// the actor; it writes the shared word only when the answer changes.
func (k *keyActor) publishBlocked(kind ratelimit.Kind, now time.Time, b *ratelimit.Bucket, lim ratelimit.Limits) {
	var until int64
	if r := b.Blocked(now, lim); r > 0 {
		until = now.Unix() + r
	}
	if w := &k.cfg.BlockedUntil[kind]; w.Load() != until {
		w.Store(until)
	}
}

// write settles idempotency keys, then forwards what is new to a shard.
func (k *keyActor) write(ctx actor.Context, req *Request, rep *Reply) {
	w := req.Write
	rep.Results = rep.results(len(w.Events))
	c := &req.c
	*c = commit{keyID: k.cfg.ID, reply: rep, replyTo: req.Reply}
	if !hasIdempotencyKeys(w) {
		// The common case: store everything as sent, no copies.
		c.write = w
		k.next++
		k.keys.shards.send(w.Dataset, k.next, c)
		return
	}
	if !k.idemReady(ctx) {
		k.parked = append(k.parked, blocked{req, rep})
		return
	}
	if k.local == nil {
		k.local = make(map[uint64]int)
	}
	local := k.local // the hashes of the idempotency keys earlier in this write
	var look *storage.IdemLookup
	defer func() {
		clear(local)
		if look != nil {
			_ = look.Close()
		}
	}()
	// Sized once: a Segment batch's 100 keyed events grew it from nothing.
	n := len(w.Events)
	k.hashes = k.hashes[:0]
	for i := range w.Events {
		if p := &w.Events[i]; p.IdemKey != "" {
			p.IdemHash = k.keys.db.IdempotencyHash(k.cfg.ID, p.IdemKey)
			k.hashes = append(k.hashes, p.IdemHash)
		}
	}
	if len(k.hashes) > 1 {
		k.keys.db.TouchIdempotency(k.hashes)
	}
	c.hashes = make([]uint64, 0, len(k.hashes))
	answered := 0 // events answered here, not stored
	for i := range w.Events {
		p := &w.Events[i]
		if p.IdemKey != "" {
			if j, ok := repeatOf(w.Events, local, i); ok {
				if w.Events[j].Hash == p.Hash {
					rep.Results[i] = Result{Outcome: Duplicate, Of: j}
				} else {
					rep.Results[i] = Result{Outcome: Conflict}
				}
				answered++
				continue
			}
			if _, busy := k.inflight[p.IdemHash]; busy {
				// Another request with this key is being committed: answer
				// this one once that one is durable, from its record.
				k.waiting[p.IdemHash] = append(k.waiting[p.IdemHash], blocked{req, rep})
				return
			}
			if look == nil {
				// One iterator for the write's keys: a Get per key sets one
				// up each time (storage.IdemLookup). Created here, after the
				// in-flight keys were set aside, it sees every settled key.
				var err error
				if look, err = k.keys.db.NewIdemLookup(); err != nil {
					rep.Err = err
					req.Reply <- rep
					return
				}
			}
			rec, err := look.GetHashed(k.cfg.ID, p.IdemKey, p.IdemHash)
			switch {
			case err == nil && IdempotencyLive(rec.CreatedAt, req.Now.UnixMilli()):
				if SameContent(rec.Hash, p.Hash, &p.Content) {
					rep.Results[i] = Result{Outcome: Replayed, ID: rec.ID, Timestamp: rec.Timestamp}
				} else {
					rep.Results[i] = Result{Outcome: Conflict}
				}
				answered++
				continue
			case err != nil && !errors.Is(err, storage.ErrNotFound):
				rep.Err = err
				req.Reply <- rep
				return
			}
			// Filed now, while the look-up's buckets are in this CPU's
			// cache: the shard writes the record where it was filed.
			p.IdemSlot, p.IdemFiled = k.keys.db.FileIdempotency(p.IdemHash, req.Now.UnixMilli())
			c.hashes = append(c.hashes, p.IdemHash)
		}
	}
	if answered == n {
		req.Reply <- rep
		return
	}
	for _, h := range c.hashes {
		k.inflight[h] = struct{}{}
	}
	if len(c.hashes) > 0 {
		c.owner = ctx.Self()
	}
	c.write = w
	if answered > 0 {
		// The events to store, and where each one's result goes; when
		// every event is new (the common case), the write as sent.
		store := make([]Pending, 0, n-answered)
		c.slots = make([]int, 0, n-answered)
		for i := range w.Events {
			if rep.Results[i].Outcome == Stored {
				store = append(store, w.Events[i])
				c.slots = append(c.slots, i)
			}
		}
		c.write = &Write{Dataset: w.Dataset, ReceivedAt: w.ReceivedAt, Events: store}
	}
	k.next++
	k.keys.shards.send(w.Dataset, k.next, c)
}

// idemReady says the store's idempotency filter is rebuilt. If it is not,
// the first caller starts a goroutine that tells the actor when it is;
// look-ups before that would hold up the actor.
func (k *keyActor) idemReady(ctx actor.Context) bool {
	ready := k.keys.idemReady()
	select {
	case <-ready:
		return true
	default:
	}
	if len(k.parked) == 0 {
		root, self := ctx.ActorSystem().Root, ctx.Self()
		go func() {
			<-ready
			root.Send(self, idemReady{})
		}()
	}
	return false
}

func hasIdempotencyKeys(w *Write) bool {
	for i := range w.Events {
		if w.Events[i].IdemKey != "" {
			return true
		}
	}
	return false
}

// repeatOf finds the first event before i in events with i's idempotency
// key; if there is none, it notes i as the first with its key. local maps
// the hash of each key noted to the first event with it; two keys of one
// write sharing a hash (odds 2^-64 a pair) are told apart by a search of
// the events before i.
func repeatOf(events []Pending, local map[uint64]int, i int) (int, bool) {
	p := &events[i]
	j, ok := local[p.IdemHash]
	if !ok {
		local[p.IdemHash] = i
		return 0, false
	}
	if events[j].IdemKey == p.IdemKey {
		return j, true
	}
	for j := range events[:i] {
		if events[j].IdemKey == p.IdemKey {
			return j, true
		}
	}
	return 0, false
}

// settle releases idempotency keys, by their hashes, and retries the
// requests that waited on them.
func (k *keyActor) settle(ctx actor.Context, hashes []uint64) {
	var retry []blocked
	for _, h := range hashes {
		delete(k.inflight, h)
		retry = append(retry, k.waiting[h]...)
		delete(k.waiting, h)
	}
	for _, b := range retry {
		k.write(ctx, b.req, b.rep)
	}
}

// persisted state: per bucket a length-prefixed blob.
func (k *keyActor) persist() {
	if !k.dirty {
		return
	}
	var out []byte
	for _, b := range k.buckets {
		p, err := b.MarshalBinary()
		if err != nil {
			k.keys.log.Error("marshal rate-limit windows", "key", k.cfg.ID, "err", err)
			return
		}
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	out = binary.BigEndian.AppendUint64(out, uint64(k.cfg.LastUsed.Load()))
	if err := k.keys.db.PutWindows(k.cfg.ID, out); err != nil {
		k.keys.log.Error("persist rate-limit windows", "key", k.cfg.ID, "err", err)
		return
	}
	k.dirty = false
}

func (k *keyActor) load() {
	for i := range k.buckets {
		k.buckets[i] = ratelimit.NewBucket()
	}
	k.inflight = make(map[uint64]struct{})
	k.waiting = make(map[uint64][]blocked)
	p, err := k.keys.db.GetWindows(k.cfg.ID)
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			k.keys.log.Error("load rate-limit windows", "key", k.cfg.ID, "err", err)
		}
		return
	}
	for i := range k.buckets {
		n, w := binary.Uvarint(p)
		if w <= 0 || uint64(len(p)-w) < n {
			k.keys.log.Error("corrupt rate-limit windows", "key", k.cfg.ID)
			return
		}
		if err := k.buckets[i].UnmarshalBinary(p[w : w+int(n)]); err != nil {
			k.keys.log.Error("corrupt rate-limit windows", "key", k.cfg.ID, "err", err)
			k.buckets[i] = ratelimit.NewBucket()
		}
		p = p[w+int(n):]
	}
	if len(p) == 8 {
		last := int64(binary.BigEndian.Uint64(p))
		if last > k.cfg.LastUsed.Load() {
			k.cfg.LastUsed.Store(last)
		}
	}
}

// LoadLastUsed reads the persisted last-use time of a key without an actor.
func LoadLastUsed(db *storage.DB, keyID string) int64 {
	p, err := db.GetWindows(keyID)
	if err != nil || len(p) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p[len(p)-8:]))
}

// Keys spawns key actors on demand for known keys only and stops them when idle.
type Keys struct {
	system *actor.ActorSystem
	db     *storage.DB
	shards *Shards
	log    *slog.Logger
	idle   time.Duration

	mu   sync.RWMutex
	pids map[string]*actor.PID
	// mailboxes are the live actors' mailboxes, for the depth gauge.
	mailboxes map[*actor.PID]*mailboxHeld

	// gate, when set, is asked before every write; an error refuses it.
	gate func() error
	// idemReady is the store's IdempotencyReady (a test's stand-in).
	idemReady func() <-chan struct{}
}

// SetWriteGate installs the check every write passes after the rate limit
// (the engine's free-disk guard). Call it before the first Send.
func (r *Keys) SetWriteGate(gate func() error) { r.gate = gate }

// NewKeys returns an empty registry; idle is how long an unused key actor lives.
func NewKeys(system *actor.ActorSystem, db *storage.DB, shards *Shards, log *slog.Logger, idle time.Duration) *Keys {
	return &Keys{system: system, db: db, shards: shards, log: log, idle: idle, idemReady: db.IdempotencyReady, pids: make(map[string]*actor.PID),
		mailboxes: make(map[*actor.PID]*mailboxHeld)}
}

// Send delivers msg to the actor of cfg's key, spawning it first if needed.
// The send happens under the read lock, so passivation (under the write lock)
// sees every message already in the old actor's mailbox.
func (r *Keys) Send(cfg *KeyConfig, msg any) {
	r.mu.RLock()
	pid := r.pids[cfg.ID]
	if pid != nil {
		r.system.Root.Send(pid, msg)
		r.mu.RUnlock()
		return
	}
	r.mu.RUnlock()
	r.mu.Lock()
	pid = r.pids[cfg.ID]
	if pid == nil {
		k := &keyActor{cfg: cfg, keys: r}
		mb := &mailboxHeld{}
		pid = r.system.Root.Spawn(mb.props(func() actor.Actor { return k }))
		r.pids[cfg.ID] = pid
		r.mailboxes[pid] = mb
	}
	r.system.Root.Send(pid, msg)
	r.mu.Unlock()
}

// passivate removes an idle actor after saving its state; it then only
// forwards stragglers to its successor until its poison pill arrives.
func (r *Keys) passivate(id string, pid *actor.PID, persist func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pids[id] != pid {
		return false
	}
	persist()
	delete(r.pids, id)
	delete(r.mailboxes, pid)
	r.system.Root.Poison(pid)
	return true
}

// Forget stops the actor of a revoked key without saving anything more.
func (r *Keys) Forget(id string) {
	r.mu.Lock()
	pid := r.pids[id]
	delete(r.pids, id)
	delete(r.mailboxes, pid)
	r.mu.Unlock()
	if pid != nil {
		r.system.Root.Poison(pid)
	}
}

// PersistAll asks every live key actor to save its windows, a few at a
// time over spread, and returns once all were asked (early if stop is
// closed). Asked at once, the 500 keys of the enterprise scenario ran 500
// goroutines and 500 Pebble commits in one burst every 5 s, during which
// requests waited some milliseconds (docs/benchmarks.md, session 29).
func (r *Keys) PersistAll(spread time.Duration, stop <-chan struct{}) {
	r.mu.RLock()
	ids := make([]string, 0, len(r.pids))
	for id := range r.pids {
		ids = append(ids, id)
	}
	r.mu.RUnlock()
	per, pause := persistSteps(len(ids), spread)
	for len(ids) > 0 {
		n := min(per, len(ids))
		// Under the read lock, as Send: a key passivated meanwhile saved
		// its windows as it went, and is skipped.
		r.mu.RLock()
		for _, id := range ids[:n] {
			if pid := r.pids[id]; pid != nil {
				r.system.Root.Send(pid, persistTick{})
			}
		}
		r.mu.RUnlock()
		if ids = ids[n:]; len(ids) == 0 {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(pause):
		}
	}
}

// persistStep is the shortest pause between two groups of keys PersistAll
// asks: a timer is not worth less.
const persistStep = 10 * time.Millisecond

// persistSteps splits n keys into groups of per, asked pause apart, so
// that the last group is asked before spread has passed.
func persistSteps(n int, spread time.Duration) (per int, pause time.Duration) {
	steps := max(1, min(n, int(spread/persistStep)))
	return (n + steps - 1) / steps, spread / time.Duration(steps)
}

// MailboxDepth is the number of messages waiting at the live key actors,
// summed at scrape time.
func (r *Keys) MailboxDepth() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d := 0
	for _, mb := range r.mailboxes {
		d += mb.depth()
	}
	return d
}

// Len is the number of live key actors.
func (r *Keys) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.pids)
}

// StopAll stops every key actor and waits until each has saved its windows.
func (r *Keys) StopAll() {
	r.mu.Lock()
	pids := make([]*actor.PID, 0, len(r.pids))
	for id, pid := range r.pids {
		pids = append(pids, pid)
		delete(r.pids, id)
		delete(r.mailboxes, pid)
	}
	r.mu.Unlock()
	for _, pid := range pids {
		_ = r.system.Root.PoisonFuture(pid).Wait()
	}
}
