package engine

import (
	"sync/atomic"
	"time"

	"github.com/eventd/eventd/actors"
)

// waitTicks is how many ticks of the wait clock make Config.WaitTimeout: a
// request gives up after 9-10 tenths of it, whichever tick it started in.
const waitTicks = 10

// waitClock is the coarse deadline of Submit's wait for its actors: a
// channel closed and replaced every tick, whose ticks each waiting request
// counts. A timer per request, armed and stopped on every write, cost the
// runtime's timer heap about 100 ns a request (docs/benchmarks.md,
// session 29); the clock costs one wake-up a tick for all of them.
type waitClock struct {
	ch     atomic.Pointer[chan struct{}]
	closed chan struct{} // once stopped: ready at once, so waits end
}

func newWaitClock() *waitClock {
	c := &waitClock{closed: make(chan struct{})}
	close(c.closed)
	ch := make(chan struct{})
	c.ch.Store(&ch)
	return c
}

// current is the channel the next tick closes.
func (c *waitClock) current() <-chan struct{} { return *c.ch.Load() }

// tick wakes every waiter: it closes the current channel after putting a
// fresh one in its place.
func (c *waitClock) tick() {
	ch := make(chan struct{})
	close(*c.ch.Swap(&ch))
}

// stopped ends every wait, present and future, at its next look.
func (c *waitClock) stopped() {
	close(*c.ch.Swap(&c.closed))
}

// run ticks every period until stop is closed.
func (c *waitClock) run(period time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.tick()
		case <-stop:
			c.stopped()
			return
		}
	}
}

// wait receives the reply from ch, or gives up (false) once waitTicks
// ticks have passed. Two ticks between two looks count as one, so a waiter
// starved of CPU waits longer, never shorter.
func (c *waitClock) wait(ch <-chan *actors.Reply) (*actors.Reply, bool) {
	tick := c.current()
	for n := 0; ; {
		select {
		case rep := <-ch:
			return rep, true
		case <-tick:
			select { // a reply that came with the tick wins
			case rep := <-ch:
				return rep, true
			default:
			}
			if n++; n >= waitTicks {
				return nil, false
			}
			tick = c.current()
		}
	}
}
