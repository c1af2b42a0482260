package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/metrics"
)

// Subscriber receives committed events of one dataset. Offer must not block:
// a subscriber owns a bounded queue and its own writer goroutine. The run is
// shared by every subscriber of the dataset and must not be changed.
type Subscriber interface {
	Offer(run *Run)
}

// Notice is a typed message for the stream subscribers of one dataset
// (goal.completed, usage.alert): live only, never stored, so it reaches
// the subscribers connected when it is published. It goes through the
// broadcaster so that a goal completion reaches a subscriber after the
// commit of the event that completed it.
type Notice struct {
	Dataset uint32
	Kind    string // KindGoalCompleted or KindUsageAlert
	// VisitorID is the visitor a goal.completed is about (HasVisitor), for
	// subscribers that filter on one.
	VisitorID  string
	HasVisitor bool
	// Payload is the whole message, {"type":Kind,...}; shared, read-only.
	Payload []byte
}

// NoticeSubscriber is a Subscriber that also takes notices; like Offer,
// Notify must not block.
type NoticeSubscriber interface {
	Notify(n *Notice)
}

// Subscribe adds a subscriber to a dataset.
type Subscribe struct {
	Dataset uint32
	Sub     Subscriber
	Done    chan struct{} // closed once the subscription is in place
}

// Unsubscribe removes a subscriber.
type Unsubscribe struct {
	Dataset uint32
	Sub     Subscriber
}

// AddConsumer registers an actor that is sent every *Committed as it
// arrives (the goals actor): a plain Send to its mailbox, so it never blocks.
type AddConsumer struct {
	PID *actor.PID
}

// broadcaster fans committed events out to the subscribers of their dataset.
type broadcaster struct {
	consumers []*actor.PID
	subs      map[uint32]map[Subscriber]struct{}
	delivered *metrics.Counter
	batches   *metrics.Counter
}

// NewBroadcaster spawns the broadcaster actor.
func NewBroadcaster(system *actor.ActorSystem, reg *metrics.Registry) *actor.PID {
	b := &broadcaster{
		subs:      make(map[uint32]map[Subscriber]struct{}),
		delivered: reg.Counter("eventd_broadcast_offers_total", "Events offered to stream subscribers.", ""),
		batches:   reg.Counter("eventd_broadcast_batches_total", "Committed batches received by the broadcaster.", ""),
	}
	var mb mailboxHeld
	RegisterMailboxDepth(reg, "broadcaster", mb.depth)
	return system.Root.Spawn(mb.props(func() actor.Actor { return b }))
}

func (b *broadcaster) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Committed:
		b.batches.Inc()
		for _, pid := range b.consumers {
			ctx.Send(pid, m)
		}
		b.fanOut(m.Events)
	case *Notice:
		for sub := range b.subs[m.Dataset] {
			if ns, ok := sub.(NoticeSubscriber); ok {
				ns.Notify(m)
			}
		}
	case *AddConsumer:
		b.consumers = append(b.consumers, m.PID)
	case *Subscribe:
		set := b.subs[m.Dataset]
		if set == nil {
			set = make(map[Subscriber]struct{})
			b.subs[m.Dataset] = set
		}
		set[m.Sub] = struct{}{}
		if m.Done != nil {
			close(m.Done)
		}
	case *Unsubscribe:
		if set := b.subs[m.Dataset]; set != nil {
			delete(set, m.Sub)
			if len(set) == 0 {
				delete(b.subs, m.Dataset)
			}
		}
	}
}

// fanOut hands each subscriber the events of its dataset, in record order.
func (b *broadcaster) fanOut(events []CommittedEvent) {
	if len(b.subs) == 0 {
		return
	}
	for i := 0; i < len(events); {
		ds := events[i].Dataset
		j := i + 1
		for j < len(events) && events[j].Dataset == ds {
			j++
		}
		if set := b.subs[ds]; len(set) > 0 {
			// One Run per dataset and commit, shared by its subscribers:
			// they encode its events once between them (Run.Payloads).
			run := NewRun(events[i:j:j])
			for sub := range set {
				sub.Offer(run)
			}
			b.delivered.Add(uint64(len(set) * (j - i)))
		}
		i = j
	}
}
