package actors

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// rig is an actor system over a real store in a temp dir.
type rig struct {
	db     *storage.DB
	system *actor.ActorSystem
	shards *Shards
	keys   *Keys
	reg    *metrics.Registry
	sink   *collector
}

// collector is a Subscriber that records what the broadcaster hands it.
type collector struct {
	mu     sync.Mutex
	events []CommittedEvent
}

func (c *collector) Offer(run *Run) {
	c.mu.Lock()
	c.events = append(c.events, run.Events...)
	c.mu.Unlock()
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func newRig(t *testing.T, idle time.Duration) *rig {
	t.Helper()
	db, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	r := &rig{db: db, reg: metrics.New(), sink: &collector{}}
	r.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	bc := NewBroadcaster(r.system, r.reg)
	done := make(chan struct{})
	r.system.Root.Send(bc, &Subscribe{Dataset: 1, Sub: r.sink, Done: done})
	<-done
	r.shards = NewShards(r.system, db, ids.NewGenerator(), 2, bc, r.reg, log)
	r.keys = NewKeys(r.system, db, r.shards, log, idle)
	t.Cleanup(func() {
		r.keys.StopAll()
		r.shards.Stop()
		_ = db.Close()
	})
	return r
}

func keyConfig(id string, lim ratelimit.Limits) *KeyConfig {
	return &KeyConfig{ID: id, Limits: func() ratelimit.Limits { return lim }, LastUsed: new(atomic.Int64)}
}

func (r *rig) submit(t *testing.T, cfg *KeyConfig, kind ratelimit.Kind, w *Write) *Reply {
	t.Helper()
	ch := make(chan *Reply, 1)
	r.keys.Send(cfg, &Request{Kind: kind, Now: time.Now(), Write: w, Reply: ch})
	select {
	case rep := <-ch:
		if rep.Err != nil {
			t.Fatalf("reply error: %v", rep.Err)
		}
		return rep
	case <-time.After(10 * time.Second):
		t.Fatal("no reply within 10 s")
		return nil
	}
}

func write(names ...string) *Write {
	w := &Write{Dataset: 1, ReceivedAt: time.Now().UnixMilli()}
	for _, n := range names {
		w.Events = append(w.Events, Pending{Event: storage.Event{Name: n, Timestamp: time.Now().UnixMilli(), Properties: []byte("{}")}})
	}
	return w
}

func idemWrite(key string, hash uint64) *Write {
	w := write("purchase")
	w.Events[0].IdemKey, w.Events[0].Hash = key, hash
	return w
}

func TestAdmissionCountsUntilLimit(t *testing.T) {
	r := newRig(t, time.Minute)
	cfg := keyConfig("key_a", ratelimit.Limits{Minute: 3, Hour: 100, Day: 1000})
	for i := 0; i < 3; i++ {
		if rep := r.submit(t, cfg, ratelimit.Standard, nil); !rep.Allowed {
			t.Fatalf("request %d refused", i)
		}
	}
	rep := r.submit(t, cfg, ratelimit.Standard, write("x"))
	if rep.Allowed || rep.RetryAfter < 1 || rep.Results != nil {
		t.Fatalf("4th request: %+v", rep)
	}
	if got := ratelimit.Tightest(rep.Windows); got.Remaining != 0 || got.Name != "minute" {
		t.Fatalf("tightest window %+v", got)
	}
	// The batch bucket is separate: one tenth of the limits, at least 1.
	if rep := r.submit(t, cfg, ratelimit.Batch, nil); !rep.Allowed {
		t.Fatal("batch bucket refused its first request")
	}
	if cfg.LastUsed.Load() == 0 {
		t.Fatal("LastUsed not set")
	}
}

func TestWritesAreStoredAndBroadcastAfterCommit(t *testing.T) {
	r := newRig(t, time.Minute)
	cfg := keyConfig("key_w", ratelimit.Limits{Minute: 1e6, Hour: 1e7, Day: 1e8})
	var wg sync.WaitGroup
	const n = 200
	ids := make(chan storage.ID, n*2)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := r.submit(t, cfg, ratelimit.Standard, write("a", "b"))
			for _, res := range rep.Results {
				if res.Outcome != Stored {
					t.Errorf("outcome %v", res.Outcome)
				}
				ids <- res.ID
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[storage.ID]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("id %x assigned twice", id)
		}
		seen[id] = true
		if _, err := r.db.GetEvent(1, id); err != nil {
			t.Fatalf("acknowledged event %x not readable: %v", id, err)
		}
	}
	if len(seen) != 2*n {
		t.Fatalf("%d ids, want %d", len(seen), 2*n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.sink.len() < 2*n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := r.sink.len(); got != 2*n {
		t.Fatalf("broadcaster saw %d events, want %d", got, 2*n)
	}
	commits := r.reg.Counter("eventd_commits_total", "", "").Value()
	if commits == 0 || commits > n {
		t.Fatalf("%d commits for %d requests: group commit should need at most one per request", commits, n)
	}
}

// A record stored by a build before the xxhash content hash holds the FNV
// hash: a retry of its content replays it, other content conflicts.
func TestIdempotencyLegacyHash(t *testing.T) {
	r := newRig(t, time.Minute)
	cfg := keyConfig("key_l", ratelimit.Limits{Minute: 1e6, Hour: 1e7, Day: 1e8})
	content := event.Content{Name: "purchase", Properties: []byte(`{"amount":5}`)}
	now := time.Now().UnixMilli()
	stored := storage.IDAt(now)
	b := r.db.NewBatch()
	b.AddIdempotency(cfg.ID, "old", storage.IdemRecord{Hash: event.LegacyContentHash(&content), ID: stored, Timestamp: now, CreatedAt: now})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	retry := func(c event.Content) Result {
		w := idemWrite("old", event.ContentHash(&c))
		w.Events[0].Content = c
		return r.submit(t, cfg, ratelimit.Standard, w).Results[0]
	}
	if res := retry(content); res.Outcome != Replayed || res.ID != stored {
		t.Fatalf("retry of the stored content: %+v, want replayed %x", res, stored)
	}
	other := content
	other.Properties = []byte(`{"amount":6}`)
	if res := retry(other); res.Outcome != Conflict {
		t.Fatalf("other content: %+v, want a conflict", res)
	}
}

func TestIdempotency(t *testing.T) {
	r := newRig(t, time.Minute)
	cfg := keyConfig("key_i", ratelimit.Limits{Minute: 1e6, Hour: 1e7, Day: 1e8})
	first := r.submit(t, cfg, ratelimit.Standard, idemWrite("k1", 7)).Results[0]
	if first.Outcome != Stored {
		t.Fatalf("first: %+v", first)
	}
	cases := []struct {
		name string
		w    *Write
		want Outcome
	}{
		{"same content replays", idemWrite("k1", 7), Replayed},
		{"other content conflicts", idemWrite("k1", 8), Conflict},
		{"new key stores", idemWrite("k2", 7), Stored},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.submit(t, cfg, ratelimit.Standard, tc.w).Results[0]
			if res.Outcome != tc.want {
				t.Fatalf("outcome %v, want %v", res.Outcome, tc.want)
			}
			if tc.want == Replayed && res.ID != first.ID {
				t.Fatalf("replayed id %x, want %x", res.ID, first.ID)
			}
		})
	}
	t.Run("twins in one write", func(t *testing.T) {
		w := idemWrite("k3", 1)
		w.Events = append(w.Events, w.Events[0])
		extra := w.Events[0]
		extra.Hash = 2
		w.Events = append(w.Events, extra)
		res := r.submit(t, cfg, ratelimit.Batch, w).Results
		if res[0].Outcome != Stored || res[1].Outcome != Duplicate || res[1].Of != 0 || res[2].Outcome != Conflict {
			t.Fatalf("results %+v", res)
		}
	})
	t.Run("a write's keys out of key order", func(t *testing.T) {
		// Looked up in key order, answered in the write's: k9 new, k1
		// replayed, an event without a key, k1 again with other content
		// (a conflict with its twin), k2 with other content than stored.
		w := idemWrite("k9", 1)
		for _, e := range []struct {
			key  string
			hash uint64
		}{{"k1", 7}, {"", 0}, {"k1", 8}, {"k2", 3}} {
			p := idemWrite(e.key, e.hash).Events[0]
			w.Events = append(w.Events, p)
		}
		res := r.submit(t, cfg, ratelimit.Batch, w).Results
		want := []Outcome{Stored, Replayed, Stored, Conflict, Conflict}
		for i, o := range want {
			if res[i].Outcome != o {
				t.Fatalf("results %+v, want outcomes %v", res, want)
			}
		}
		if res[1].ID != first.ID || res[0].ID == (storage.ID{}) || res[2].ID == (storage.ID{}) || res[0].ID == res[2].ID {
			t.Fatalf("ids %+v", res)
		}
	})
	t.Run("concurrent twins store one event", func(t *testing.T) {
		var wg sync.WaitGroup
		got := make(chan Result, 20)
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got <- r.submit(t, cfg, ratelimit.Standard, idemWrite("k4", 9)).Results[0]
			}()
		}
		wg.Wait()
		close(got)
		var stored int
		var id storage.ID
		for res := range got {
			if res.Outcome == Stored {
				stored++
			}
			if id != (storage.ID{}) && res.ID != id {
				t.Fatalf("different ids for one key: %x and %x", id, res.ID)
			}
			id = res.ID
		}
		if stored != 1 {
			t.Fatalf("%d stored, want 1", stored)
		}
	})
}

func TestPassivationKeepsCounts(t *testing.T) {
	r := newRig(t, 50*time.Millisecond)
	cfg := keyConfig("key_p", ratelimit.Limits{Minute: 4, Hour: 100, Day: 1000})
	for i := 0; i < 2; i++ {
		r.submit(t, cfg, ratelimit.Standard, nil)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.keys.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r.keys.Len() != 0 {
		t.Fatal("idle key actor was not passivated")
	}
	// The successor loads the saved windows: two more pass, the fifth is refused.
	for i := 0; i < 2; i++ {
		if !r.submit(t, cfg, ratelimit.Standard, nil).Allowed {
			t.Fatalf("request %d after passivation refused", i+3)
		}
	}
	if r.submit(t, cfg, ratelimit.Standard, nil).Allowed {
		t.Fatal("limit not kept across passivation")
	}
}

func TestUnknownMessagesAreIgnored(t *testing.T) {
	r := newRig(t, time.Minute)
	cfg := keyConfig("key_u", ratelimit.Limits{Minute: 10, Hour: 10, Day: 10})
	r.keys.Send(cfg, "noise")
	if !r.submit(t, cfg, ratelimit.Standard, nil).Allowed {
		t.Fatal("actor stopped working after an unknown message")
	}
}

func TestBlockedUntilAndAdmittedWrites(t *testing.T) {
	r := newRig(t, time.Minute)
	cfg := keyConfig("key_b", ratelimit.Limits{Minute: 2, Hour: 100, Day: 1000})
	if rep := r.submit(t, cfg, ratelimit.Standard, nil); !rep.Allowed || cfg.BlockedUntil[ratelimit.Standard].Load() != 0 {
		t.Fatalf("first request: allowed %v, blocked until %d", rep.Allowed, cfg.BlockedUntil[ratelimit.Standard].Load())
	}
	// A write counted earlier (Admitted) is stored without being counted again.
	w := write("pre-admitted")
	w.Admitted = true
	rep := r.submit(t, cfg, ratelimit.Standard, w)
	if !rep.Allowed || len(rep.Results) != 1 || ratelimit.Tightest(rep.Windows).Remaining != 1 {
		t.Fatalf("admitted write: allowed %v, results %d, windows %+v", rep.Allowed, len(rep.Results), rep.Windows)
	}
	// The second counted request fills the minute: the actor publishes when it frees.
	now := time.Now()
	if rep := r.submit(t, cfg, ratelimit.Standard, nil); !rep.Allowed {
		t.Fatal("second request refused")
	}
	until := cfg.BlockedUntil[ratelimit.Standard].Load()
	if until <= now.Unix() || until > now.Unix()+61 {
		t.Fatalf("blocked until %d, now %d", until, now.Unix())
	}
	if cfg.BlockedUntil[ratelimit.Batch].Load() != 0 {
		t.Fatal("the batch bucket is not full")
	}
	rep = r.submit(t, cfg, ratelimit.Standard, nil)
	if rep.Allowed || now.Unix()+rep.RetryAfter < until-1 {
		t.Fatalf("third request: allowed %v, retry after %d, blocked until %d", rep.Allowed, rep.RetryAfter, until)
	}
}

// TestKeyedWritesWaitForTheFilter: until the store's idempotency filter is
// rebuilt after a start, keyed writes wait, in order, and the key's other
// requests are answered meanwhile; then the keyed writes are stored.
func TestKeyedWritesWaitForTheFilter(t *testing.T) {
	r := newRig(t, time.Minute)
	ready := make(chan struct{})
	r.keys.idemReady = func() <-chan struct{} { return ready }
	cfg := keyConfig("key_w", ratelimit.Limits{Minute: 1e6, Hour: 1e7, Day: 1e8})
	parked := make(chan *Reply, 2)
	for _, w := range []*Write{idemWrite("k1", 7), idemWrite("k1", 7)} {
		r.keys.Send(cfg, &Request{Kind: ratelimit.Standard, Now: time.Now(), Write: w, Reply: parked})
	}
	// Answered while the keyed writes wait: an unkeyed write, a read.
	if rep := r.submit(t, cfg, ratelimit.Standard, write("plain")); rep.Results[0].Outcome != Stored {
		t.Fatalf("unkeyed write: %+v", rep.Results)
	}
	if rep := r.submit(t, cfg, ratelimit.Standard, nil); !rep.Allowed {
		t.Fatalf("read refused: %+v", rep)
	}
	// The unkeyed write went through the dataset's shard after them: had
	// they not waited, k1 would be stored.
	if _, err := r.db.GetIdempotency("key_w", "k1"); err != storage.ErrNotFound {
		t.Fatalf("k1 looked up before the filter was ready: %v, want not found", err)
	}
	select {
	case rep := <-parked:
		t.Fatalf("a keyed write was answered before the filter was ready: %+v", rep)
	default:
	}
	close(ready)
	var got []Outcome
	for range 2 {
		select {
		case rep := <-parked:
			if rep.Err != nil {
				t.Fatal(rep.Err)
			}
			got = append(got, rep.Results[0].Outcome)
		case <-time.After(10 * time.Second):
			t.Fatal("a keyed write was not answered within 10 s of the filter's rebuild")
		}
	}
	if got[0] != Stored || got[1] != Replayed {
		t.Errorf("outcomes %v, want stored, then replayed", got)
	}
}

// TestPersistSteps checks PersistAll's groups: every key asked, the last
// group before the spread has passed, never a pause under persistStep
// unless there is one group.
func TestPersistSteps(t *testing.T) {
	cases := []struct {
		n         int
		spread    time.Duration
		per       int
		pause     time.Duration
		wantSteps int
	}{
		{0, 4 * time.Second, 0, 4 * time.Second, 0},
		{1, 4 * time.Second, 1, 4 * time.Second, 1},
		{3, 4 * time.Second, 1, 4 * time.Second / 3, 3},
		{500, 4 * time.Second, 2, 10 * time.Millisecond, 250},
		{401, 4 * time.Second, 2, 10 * time.Millisecond, 201},
		{100_000, 4 * time.Second, 250, 10 * time.Millisecond, 400},
		{5, time.Millisecond, 5, time.Millisecond, 1},
	}
	for _, c := range cases {
		per, pause := persistSteps(c.n, c.spread)
		if per != c.per || pause != c.pause {
			t.Errorf("persistSteps(%d, %v) = %d, %v; want %d, %v", c.n, c.spread, per, pause, c.per, c.pause)
			continue
		}
		steps := 0
		if per > 0 {
			steps = (c.n + per - 1) / per
		}
		if steps != c.wantSteps || time.Duration(max(steps-1, 0))*pause >= max(c.spread, pause) {
			t.Errorf("n=%d: %d groups, the last after %v; want %d groups within %v", c.n, steps, time.Duration(max(steps-1, 0))*pause, c.wantSteps, c.spread)
		}
	}
}

// TestPersistAll: every live key saves its windows; a closed stop ends
// the round after its first group.
func TestPersistAll(t *testing.T) {
	r := newRig(t, time.Minute)
	var cfgs []*KeyConfig
	for i := range 5 {
		cfg := keyConfig(fmt.Sprintf("key_%d", i), ratelimit.Limits{Minute: 100, Hour: 1000, Day: 10000})
		r.submit(t, cfg, ratelimit.Standard, nil)
		cfgs = append(cfgs, cfg)
	}
	saved := func() int {
		n := 0
		for _, cfg := range cfgs {
			if _, err := r.db.GetWindows(cfg.ID); err == nil {
				n++
			}
		}
		return n
	}
	stop := make(chan struct{})
	close(stop)
	// Groups 12 minutes apart: returns at once only if it heeds stop.
	r.keys.PersistAll(time.Hour, stop)
	r.keys.PersistAll(50*time.Millisecond, make(chan struct{}))
	deadline := time.Now().Add(10 * time.Second)
	for saved() < len(cfgs) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := saved(); n != len(cfgs) {
		t.Fatalf("%d of %d keys saved their windows", n, len(cfgs))
	}
}
