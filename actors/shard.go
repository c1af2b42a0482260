package actors

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/storage"
)

// maxBatchEvents bounds one group commit so a flood cannot build a batch
// whose commit stalls every waiter behind it.
const maxBatchEvents = 4096

// shard group-commits writes: it keeps adding to one Pebble batch while more
// commits are queued for it, and commits with fsync when its queue runs dry.
type shard struct {
	db          *storage.DB
	gen         *ids.Generator
	horizon     *ids.Horizon // nil: nobody reads the settled horizon (tests)
	hold        *ids.Hold    // taken with the open batch, released once it is committed
	queued      atomic.Int64 // commits sent and not yet received
	broadcaster *actor.PID
	system      *actor.ActorSystem
	log         *slog.Logger
	m           *shardMetrics

	batch   *storage.Batch
	pending []*commit
	hooks   *Webhooks     // nil: no webhooks (tests); see webhook.go
	outbox  []outboxEvent // outbox entries in the open batch
}

type shardMetrics struct {
	commits     *metrics.Counter
	events      *metrics.Counter
	failures    *metrics.Counter
	batchEvents *metrics.Histogram
	commitTime  *metrics.Histogram
}

func (s *shard) Receive(ctx actor.Context) {
	c, ok := ctx.Message().(*commit)
	if !ok {
		return
	}
	if s.batch == nil {
		s.batch = s.db.NewBatch()
		if s.horizon != nil {
			// Before the batch's first id: cursors deliver nothing at or
			// above this hold's floor until the batch is committed.
			s.hold = s.horizon.Hold()
		}
	}
	now := time.Now().UnixMilli()
	var routes []*WebhookConfig
	if s.hooks != nil {
		routes = s.hooks.eventRoutes(c.write.Dataset)
	}
	block := s.gen.Reserve(len(c.write.Events))
	for i := range c.write.Events {
		p := &c.write.Events[i]
		var ms int64
		p.Event.ID, ms = block.Next()
		p.Event.CreatedAt = c.write.ReceivedAt
		if p.AtReceipt {
			p.Event.Timestamp = ms
			if p.Profile != nil {
				p.Profile.Timestamp = ms
			}
		}
		s.batch.AddEvent(c.write.Dataset, &p.Event)
		if p.Profile != nil {
			s.batch.AddProfile(c.write.Dataset, p.Profile)
		}
		if len(routes) > 0 {
			// The delivery promise commits with the event; sending is the webhook actor's.
			s.addOutbox(routes, c.write.Dataset, &p.Event)
		}
	}
	if len(c.hashes) > 0 {
		s.addIdempotency(c, now)
	}
	s.pending = append(s.pending, c)
	if s.queued.Add(-1) == 0 || s.batch.Len() >= maxBatchEvents {
		s.flush()
	}
}

// addIdempotency adds the records of c's keyed events, after the events,
// where the key actor filed them (storage.DB.FileIdempotency): the shard
// does not read the filter, whose buckets the key actor had in its cache
// and the shard read again, a cache miss or two a key (session 39).
func (s *shard) addIdempotency(c *commit, now int64) {
	for i := range c.write.Events {
		if p := &c.write.Events[i]; p.IdemKey != "" {
			s.batch.AddIdempotencyFiled(c.keyID, p.IdemKey, p.IdemSlot, p.IdemFiled, storage.IdemRecord{
				Hash: p.Hash, ID: p.Event.ID, Timestamp: p.Event.Timestamp, CreatedAt: now,
			})
		}
	}
}

// flush commits the batch and answers everyone who waited for it.
func (s *shard) flush() {
	start := time.Now()
	events := s.batch.Len()
	err := s.batch.Commit(true)
	s.batch.Close()
	s.batch = nil
	s.hold.Release() // committed (or failed for good): its ids are settled
	s.hold = nil
	s.m.commitTime.Observe(time.Since(start).Seconds())
	s.m.commits.Inc()
	if err != nil {
		s.m.failures.Inc()
		s.log.Error("commit failed", "err", err, "requests", len(s.pending))
	}
	// Before any reply: once a client has its 201, the webhook actor holds the event.
	s.sendOutbox(err != nil)
	n := 0
	var done []CommittedEvent // handed to the broadcaster whole
	if err == nil && s.broadcaster != nil {
		done = make([]CommittedEvent, 0, events)
	}
	for _, c := range s.pending {
		rep := c.reply
		if err != nil {
			rep.Err = err
		} else {
			for j := range c.write.Events {
				slot := j
				if c.slots != nil {
					slot = c.slots[j]
				}
				e := &c.write.Events[j].Event
				rep.Results[slot] = Result{Outcome: Stored, ID: e.ID, Timestamp: e.Timestamp}
				if s.broadcaster != nil {
					done = append(done, CommittedEvent{Dataset: c.write.Dataset, Event: e})
				}
			}
			n += len(c.write.Events)
		}
		// c lives in its request, which the receiver of rep may reuse at
		// once: read what is still needed before the reply goes.
		owner, hashes := c.owner, c.hashes
		c.replyTo <- rep
		if owner != nil {
			s.system.Root.Send(owner, &idemDone{hashes: hashes})
		}
	}
	s.m.events.Add(uint64(n))
	s.m.batchEvents.Observe(float64(n))
	clear(s.pending)
	s.pending = s.pending[:0]
	// Only now, after fsync, may anyone outside see these events.
	if len(done) > 0 {
		s.system.Root.Send(s.broadcaster, &Committed{Events: done})
	}
}

// Shards is the set of shard actors.
type Shards struct {
	system *actor.ActorSystem
	shards []*shard
	pids   []*actor.PID
}

// NewShards spawns n shard actors writing to db with ids from gen and telling broadcaster (may be nil) of commits.
func NewShards(system *actor.ActorSystem, db *storage.DB, gen *ids.Generator, n int, broadcaster *actor.PID, reg *metrics.Registry, log *slog.Logger) *Shards {
	s := &Shards{system: system}
	m := &shardMetrics{
		commits:     reg.Counter("eventd_commits_total", "Pebble batch commits with fsync.", ""),
		events:      reg.Counter("eventd_events_stored_total", "Events made durable.", ""),
		failures:    reg.Counter("eventd_commit_failures_total", "Pebble commits that failed.", ""),
		batchEvents: reg.Histogram("eventd_commit_batch_events", "Events per group commit.", "", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}),
		commitTime:  reg.Histogram("eventd_commit_duration_seconds", "Time of one group commit including fsync.", "", metrics.LatencyBuckets),
	}
	mbs := make([]mailboxHeld, n)
	for i := 0; i < n; i++ {
		sh := &shard{db: db, gen: gen, broadcaster: broadcaster, system: system, log: log, m: m}
		s.shards = append(s.shards, sh)
		s.pids = append(s.pids, system.Root.Spawn(mbs[i].props(func() actor.Actor { return sh })))
	}
	reg.GaugeFunc("eventd_shard_queue", "Commits queued at the shards.", "", func() float64 { return float64(s.Queued()) })
	RegisterMailboxDepth(reg, "shard", func() int {
		d := 0
		for i := range mbs {
			d += mbs[i].depth()
		}
		return d
	})
	return s
}

// send spreads one dataset's writes over the shards: the dataset picks a
// starting shard and the key actor's counter rotates from there.
func (s *Shards) send(ds uint32, rotate uint32, c *commit) {
	i := (uint64(ds)*0x9e3779b97f4a7c15 + uint64(rotate)) % uint64(len(s.shards))
	s.shards[i].queued.Add(1)
	s.system.Root.Send(s.pids[i], c)
}

// Queued is the number of commits waiting at all shards, for overload checks.
func (s *Shards) Queued() int64 {
	var n int64
	for _, sh := range s.shards {
		n += sh.queued.Load()
	}
	return n
}

// UseHorizon makes the shards hold h while a batch is open; call it before
// the first write.
func (s *Shards) UseHorizon(h *ids.Horizon) {
	for _, sh := range s.shards {
		sh.horizon = h
	}
}

// Len is the number of shards.
func (s *Shards) Len() int { return len(s.shards) }

// Stop stops the shards after they have committed what they hold.
func (s *Shards) Stop() {
	for _, pid := range s.pids {
		_ = s.system.Root.PoisonFuture(pid).Wait()
	}
}
