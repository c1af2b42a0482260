package engine

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/engine/storemetrics"
	"github.com/eventd/eventd/storage"
	"github.com/eventd/eventd/storage/diskspace"
)

// DefaultShards is eventd serve's shard count for n processors (GOMAXPROCS
// before its spare one): one shard a pair of them. A shard builds its
// batches on one core while the requests are decoded on the others, and
// two shards' batches take ids concurrently, so a flushed table of
// records, name index or idempotency keys often holds ids below the last
// table's and is merged with it instead of moved down. On two cores one
// shard cost 12% less CPU a single event, 19% less a batched one, with the
// same single ratio and shorter tails (docs/benchmarks.md, session 37);
// more cores keep parallel commits, untested here.
func DefaultShards(n int) int {
	return max(1, n/2)
}

// Config configures an Engine.
type Config struct {
	DataDir string
	// Shards is the number of shard actors; 0 means two, so that tests
	// commit from concurrent shards (eventd serve passes DefaultShards).
	Shards  int
	Logger  *slog.Logger
	Metrics *metrics.Registry
	// FS replaces the filesystem under Pebble (tests and benchmarks).
	FS vfs.FS
	// DerivedInterval is how often counters and rollups kept in memory are
	// checkpointed to Pebble (0: storage.DefaultDerivedInterval).
	DerivedInterval time.Duration
	// WALMinSyncInterval is storage.Options.WALMinSyncInterval.
	WALMinSyncInterval time.Duration
	// VisitorMemory is storage.Options.VisitorMemory.
	VisitorMemory int
	// LateMemory is storage.Options.LateMemory.
	LateMemory int
	// IdempotencyFilterKeys is storage.Options.IdempotencyFilterKeys.
	IdempotencyFilterKeys int
	// IdempotencyFilterSave is storage.Options.IdempotencyFilterSave.
	IdempotencyFilterSave time.Duration
	// KeyIdle is how long an unused key actor lives (default 5 min).
	KeyIdle time.Duration
	// MaxQueued is the number of queued commits past which writes get 503 (default 4096 per shard).
	MaxQueued int64
	// WaitTimeout bounds how long a request waits for its actors (default
	// 10 s): it gives up after 9-10 tenths of it (waitclock.go).
	WaitTimeout time.Duration
	// WebhooksAllowPrivate lets live webhooks reach private and loopback addresses (SSRF guard off).
	WebhooksAllowPrivate bool
	// DataRoot is the service's data directory (--data), which holds DataDir;
	// backups are refused inside it (and inside DataDir).
	DataRoot string
	// Disk refuses writes while the data volume is short of space (nil: never).
	Disk *diskspace.Guard
	// ReadOnly opens the store without writing anything: a start on a volume
	// too full for Pebble to open (it writes a manifest and flushes its WAL);
	// every write is refused as for a short disk (disk.go).
	ReadOnly bool
	// OnStorageFatal is called once when the store fails beyond repair (see
	// storage.FatalError); it must end the process. nil exits with status 3.
	OnStorageFatal func(error)
}

// Engine is the running service core.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	db      *storage.DB
	system  *actor.ActorSystem
	shards  *actors.Shards
	keys    *actors.Keys
	bcast   *actor.PID
	an      *analyticsState // goals, funnels and the goals actor (goals.go)
	hooks   *hookState      // webhooks, usage alerts and the webhook actor (webhooks.go)
	metrics *metrics.Registry
	ipGuard *ratelimit.IPGuard
	ids     *ids.Generator // shared by shards and imports so ids stay ordered
	horizon *ids.Horizon   // how far ids are settled, for cursors (cursors.go)
	cursors cursorRegistry // connected named cursors (cursors.go)

	mu         sync.RWMutex // guards the maps below; writers also hold adminMu
	adminMu    sync.Mutex   // serialises admin changes
	projects   map[string]*projectState
	keysByHash map[[32]byte]*Principal
	keysByID   map[string]*Principal
	keyRecords map[string]*keyRecord // every key, revoked ones too
	nextDS     uint32

	requests  sync.Pool  // *actors.Request with its reply channel (Submit, Release)
	clock     *waitClock // Submit's deadline (waitclock.go)
	clockStop chan struct{}
	jobs      jobs
	hooksMu   sync.Mutex
	drained   []func()
	revoked   []func(Revocation) // OnRevoked (stream.go)
	stop      chan struct{}
	wg        sync.WaitGroup
}

// Errors the HTTP layer maps to statuses.
var (
	ErrNotFound   = errors.New("not found")
	ErrOverloaded = errors.New("overloaded")
	ErrInvalid    = errors.New("invalid")
	ErrConflict   = errors.New("conflict")
)

// Open opens the store, loads configuration and starts the actors.
func Open(cfg Config) (*Engine, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
		cfg.Metrics.RegisterProcess()
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 2
	}
	if cfg.KeyIdle <= 0 {
		cfg.KeyIdle = 5 * time.Minute
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = 4096 * int64(cfg.Shards)
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 10 * time.Second
	}
	stalls := storemetrics.NewStalls()
	db, err := storage.Open(cfg.DataDir, storage.Options{FS: cfg.FS, Logger: cfg.Logger, OnFatal: cfg.OnStorageFatal, ReadOnly: cfg.ReadOnly,
		DerivedInterval: cfg.DerivedInterval, WALMinSyncInterval: cfg.WALMinSyncInterval, VisitorMemory: cfg.VisitorMemory, LateMemory: cfg.LateMemory, IdempotencyFilterKeys: cfg.IdempotencyFilterKeys, IdempotencyFilterSave: cfg.IdempotencyFilterSave, Events: stalls.Listener()})
	if err != nil {
		return nil, err
	}
	if db.OldRecords() {
		_ = db.Close()
		return nil, fmt.Errorf("the store at %s keeps its event records by id, as eventd did before keying them by time, and a read-only start cannot move them: free space on the data volume (delete <data>/ballast) and start again", cfg.DataDir)
	}
	cfg.Metrics.MustRegister(storemetrics.NewCollector(db.Metrics, stalls))
	e := &Engine{
		cfg: cfg, log: cfg.Logger, db: db, metrics: cfg.Metrics,
		ipGuard:    ratelimit.NewIPGuard(600),
		ids:        ids.NewGenerator(),
		projects:   make(map[string]*projectState),
		keysByHash: make(map[[32]byte]*Principal),
		keysByID:   make(map[string]*Principal),
		keyRecords: make(map[string]*keyRecord),
		hooks:      newHookState(),
		stop:       make(chan struct{}),
		clock:      newWaitClock(),
		clockStop:  make(chan struct{}),
	}
	e.horizon = ids.NewHorizon(e.ids)
	e.cfg.Metrics.MustRegister(&cursorCollector{e: e})
	e.requests.New = func() any { return &actors.Request{Reply: make(chan *actors.Reply, 1)} }
	if err := e.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	logger := cfg.Logger.With("component", "actors")
	e.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	e.bcast = actors.NewBroadcaster(e.system, e.metrics)
	// Before the goals actor, which may queue goal.completed as it catches up.
	if err := e.startWebhooks(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := e.openAnalytics(); err != nil {
		_ = db.Close()
		return nil, err
	}
	e.shards = actors.NewShards(e.system, db, e.ids, cfg.Shards, e.bcast, e.metrics, cfg.Logger)
	e.shards.UseHorizon(e.horizon)
	e.shards.SetWebhooks(e.hooks.wh)
	e.keys = actors.NewKeys(e.system, db, e.shards, cfg.Logger, cfg.KeyIdle)
	e.startDisk()
	e.metrics.GaugeFunc("eventd_key_actors", "Live key actors.", "", func() float64 { return float64(e.keys.Len()) })
	actors.RegisterMailboxDepth(e.metrics, "key", e.keys.MailboxDepth)
	e.metrics.GaugeFunc("eventd_derived_buckets", "Counter and rollup buckets held in memory until the next checkpoint.", "", func() float64 {
		b, _ := e.db.DerivedBacklog()
		return float64(b)
	})
	e.metrics.GaugeFunc("eventd_visitor_index_memory_entries", "Visitor index entries of recent days held in memory until their day, or what memory holds of it past --visitor-memory, is written to the store.", "", func() float64 {
		n, _ := e.db.VisitorMemory()
		return float64(n)
	})
	e.metrics.GaugeFunc("eventd_late_index_memory_entries", "Events with their clients' recent times whose time and name index keys are held in memory until written in time order (--late-memory).", "", func() float64 {
		n, _ := e.db.LateMemory()
		return float64(n)
	})
	e.metrics.GaugeFunc("eventd_late_index_memory_bytes", "Bytes those events take in memory, their visitor ids included (bounded at 64 per --late-memory entry).", "", func() float64 {
		_, b := e.db.LateMemory()
		return float64(b)
	})
	e.metrics.GaugeFunc("eventd_visitor_index_memory_days", "Days whose visitor index is held in memory.", "", func() float64 {
		_, days := e.db.VisitorMemory()
		return float64(days)
	})
	e.metrics.GaugeFunc("eventd_visitor_index_split_days", "Days in memory whose visitor index was split past --visitor-memory (what memory held written to the store); above 0, a day has more events than the bound.", "", func() float64 {
		return float64(e.db.VisitorSplitDays())
	})
	e.metrics.GaugeFunc("eventd_idempotency_filter_keys", "Idempotency keys the filter in memory finds (kept by the second they arrived in); at --idempotency-filter-keys, new keys are kept by day and every look-up reads those too.", "", func() float64 {
		n, _ := e.db.IdempotencyFilter()
		return float64(n)
	})
	e.metrics.CounterFunc("eventd_idempotency_keys_by_day_total", "Idempotency keys the filter in memory refused since start (full at --idempotency-filter-keys, or older than its last save), kept by day instead: each keyed write then also reads those.", func() float64 {
		return float64(e.db.IdempotencyKeysByDay())
	})
	e.metrics.GaugeFunc("eventd_idempotency_filter_bytes", "Bytes of the idempotency filter's tables (16 per key at most).", "", func() float64 {
		_, b := e.db.IdempotencyFilter()
		return float64(b)
	})
	e.metrics.GaugeFunc("eventd_derived_commits", "Commits folded into memory since the last checkpoint; a crash replays them at start.", "", func() float64 {
		_, c := e.db.DerivedBacklog()
		return float64(c)
	})
	if err := e.loadJobs(); err != nil {
		e.log.Error("load jobs", "err", err)
	}
	e.wg.Add(1)
	go e.background()
	go e.clock.run(e.cfg.WaitTimeout/waitTicks, e.clockStop)
	return e, nil
}

// background persists rate-limit windows every few seconds, forgets old
// idempotency keys and applies retention hourly (and once at start, so
// that a process restarted more often than hourly still does).
func (e *Engine) background() {
	defer e.wg.Done()
	persist := time.NewTicker(5 * time.Second)
	sweep := time.NewTicker(time.Hour)
	e.sweep(time.Now())
	defer persist.Stop()
	defer sweep.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-persist.C:
			if e.cfg.ReadOnly {
				continue
			}
			// Windows are written without fsync; syncing the WAL here makes
			// the previous tick's writes durable, so counts survive a crash
			// within 10 s, as the contract asks, at one fsync per 5 s. The
			// keys save theirs over the next 4 s, before the next tick.
			if err := e.db.Flush(); err != nil {
				e.log.Error("sync rate-limit windows", "err", err)
			}
			e.keys.PersistAll(4*time.Second, e.stop)
		case <-sweep.C:
			e.sweep(time.Now())
		}
	}
}

// sweep applies every project's retention and deletes the days of
// idempotency records that are all past their 24 hours. A read-only store
// (a start on a full volume) can delete nothing: it sweeps once it runs
// read-write again, at that start.
func (e *Engine) sweep(now time.Time) {
	if e.cfg.ReadOnly {
		return
	}
	e.expire(now)
	if err := e.db.SweepIdempotency(now.Add(-actors.IdempotencyTTL).UnixMilli()); err != nil {
		e.log.Error("sweep idempotency keys", "err", err)
	}
}

// Close stops the actors after they finish what they hold, then closes the store.
func (e *Engine) Close() error {
	close(e.stop)
	e.wg.Wait()
	e.jobs.wg.Wait() // jobs write to the store
	e.keys.StopAll()
	e.shards.Stop()
	close(e.clockStop) // after the shards: every write in flight has its reply
	_ = e.system.Root.PoisonFuture(e.bcast).Wait()
	e.closeAnalytics() // after the broadcaster: it has handed the goals actor every commit
	e.stopWebhooks()   // after the shards and the goals actor, which queue deliveries; before the store closes
	e.hooksMu.Lock()
	hooks := e.drained
	e.hooksMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	if err := e.db.Flush(); err != nil {
		e.log.Error("flush at close", "err", err)
	}
	return e.db.Close()
}

// DB is the store, for subsystems built on the engine.
func (e *Engine) DB() *storage.DB { return e.db }

// Metrics is the engine's registry.
func (e *Engine) Metrics() *metrics.Registry { return e.metrics }

// Authenticate resolves an API key's text; nil for unknown or revoked keys.
// Unknown keys create no state: one hash and one map lookup.
func (e *Engine) Authenticate(key []byte) *Principal {
	if len(key) != keyLen {
		return nil
	}
	h := sha256.Sum256(key)
	e.mu.RLock()
	p := e.keysByHash[h]
	e.mu.RUnlock()
	return p
}

// Submit sends a request to the key actor of p and waits for its answer.
// write may be nil (admission only). It deliberately ignores client
// disconnects and server shutdown: once sent, a write is committed, and the
// request finishes with its true outcome; only the deadline ends the wait.
// On ErrInsufficientStorage the reply is returned too, with its windows.
func (e *Engine) Submit(p *Principal, kind ratelimit.Kind, write *actors.Write, snapshot bool) (*actors.Reply, error) {
	if write != nil && e.shards.Queued() >= e.cfg.MaxQueued {
		return nil, ErrOverloaded
	}
	// The request is pooled with its reply, its commit and its channel:
	// they were three allocations of every write. Release puts it back.
	req := e.requests.Get().(*actors.Request)
	ch := req.Reply
	req.Kind, req.Now, req.Write, req.Snapshot = kind, time.Now(), write, snapshot
	e.keys.Send(&p.cfg, req)
	rep, ok := e.clock.wait(ch)
	if !ok {
		// The actors may still fill in the reply and send it: never reuse
		// this request or its channel; the collector takes them.
		return nil, ErrOverloaded
	}
	if rep.Err != nil {
		if errors.Is(rep.Err, actors.ErrStopped) {
			e.Release(rep)
			return nil, ErrOverloaded
		}
		// The reply goes along: a write refused for space after its
		// rate-limit check still carries the windows for the headers.
		return rep, storageError(rep.Err)
	}
	return rep, nil
}

// Release hands back a reply Submit returned once the caller has read all
// it needs (windows, results): the reply, its request and channel are
// reused by a later Submit. Call it at most once per reply, or not at all
// to leave it to the collector; nil is ignored.
func (e *Engine) Release(rep *actors.Reply) {
	if rep == nil {
		return
	}
	req := rep.Request()
	if req == nil {
		return
	}
	req.Reset()
	e.requests.Put(req)
}

// AllowPageview applies the per-client-IP guard for public-key pageviews.
func (e *Engine) AllowPageview(ip string, now time.Time) (bool, int64) {
	return e.ipGuard.Allow(ip, now)
}

// GetEvent reads one event of p's dataset. An event older than the
// retention cutoff is not found even before the sweep has deleted it (the
// sweep runs at start and hourly), as List already starts at the cutoff.
func (e *Engine) GetEvent(p *Principal, id storage.ID) (storage.Event, error) {
	ev, err := e.db.GetEvent(p.dataset, id)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && ev.Timestamp < p.cutoff(time.Now())) {
		return storage.Event{}, ErrNotFound
	}
	return ev, err
}

// List reads one page of p's dataset; q.Dataset is set here.
func (e *Engine) List(p *Principal, q storage.ListQuery) ([]storage.Event, int64, error) {
	q.Dataset = p.dataset
	// Events before the retention cutoff are gone, but the day counters that
	// cover them are kept for charts: start there so totals stay exact.
	q.From = max(q.From, p.cutoff(time.Now()))
	if q.Match != nil {
		q.MaxScan = MaxListScan
	}
	events, total, err := e.db.List(q)
	if errors.Is(err, storage.ErrScanLimit) {
		return nil, 0, &ScanLimitError{Param: "where", Message: fmt.Sprintf(
			"A where= filter reads every event of the range, and it has more than %d; narrow from/to or add event= or visitor_id=", MaxListScan)}
	}
	return events, total, err
}

// MaxListScan bounds the records one filtered GET /events reads (about a
// second of point reads on a loaded store); past it the answer is 422.
const MaxListScan = 200_000

// Subscribe registers a live subscriber on p's dataset and waits until it is in place.
func (e *Engine) Subscribe(p *Principal, sub actors.Subscriber) {
	done := make(chan struct{})
	e.system.Root.Send(e.bcast, &actors.Subscribe{Dataset: p.dataset, Sub: sub, Done: done})
	<-done
}

// Unsubscribe removes a live subscriber.
func (e *Engine) Unsubscribe(p *Principal, sub actors.Subscriber) {
	e.system.Root.Send(e.bcast, &actors.Unsubscribe{Dataset: p.dataset, Sub: sub})
}

func nowText() string { return string(event.AppendTime(nil, time.Now().UnixMilli())) }

func msText(ms int64) string { return string(event.AppendTime(nil, ms)) }

// PrincipalByID finds an active key by id, for admin views of usage.
func (e *Engine) PrincipalByID(id string) *Principal {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.keysByID[id]
}
