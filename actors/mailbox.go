package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/metrics"
)

// mailboxHeld keeps an actor's mailbox so its depth can be read at scrape
// time. protoactor's unbounded mailbox counts its user messages with one
// atomic add already; reading that count costs a message nothing, where a
// MailboxMiddleware would add two shared atomic adds to every message.
type mailboxHeld struct{ mb atomic.Pointer[actor.Mailbox] }

// props is protoactor's default props for producer, with the mailbox kept.
func (h *mailboxHeld) props(producer actor.Producer) *actor.Props {
	return actor.PropsFromProducer(producer, actor.WithMailbox(func() actor.Mailbox {
		mb := actor.Unbounded()()
		h.mb.Store(&mb)
		return mb
	}))
}

// depth is the number of user messages waiting (0 before the actor starts).
func (h *mailboxHeld) depth() int {
	if p := h.mb.Load(); p != nil {
		return (*p).UserMessageCount()
	}
	return 0
}

// RegisterMailboxDepth adds the mailbox-depth series of one actor kind.
func RegisterMailboxDepth(reg *metrics.Registry, kind string, depth func() int) {
	reg.GaugeFunc("eventd_actor_mailbox_messages", "Messages waiting in the mailboxes of the actors of a kind, read at scrape time.",
		`kind="`+kind+`"`, func() float64 { return float64(depth()) })
}
