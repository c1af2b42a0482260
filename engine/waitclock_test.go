package engine

import (
	"runtime"
	"testing"
	"time"

	"github.com/eventd/eventd/actors"
)

// TestWaitClock drives the clock by hand: a wait ends with its reply, never
// before waitTicks ticks without one, and once the clock is stopped, at once.
func TestWaitClock(t *testing.T) {
	t.Run("reply", func(t *testing.T) {
		c := newWaitClock()
		ch := make(chan *actors.Reply, 1)
		want := &actors.Reply{}
		ch <- want
		if rep, ok := c.wait(ch); !ok || rep != want {
			t.Fatalf("wait = %p, %v; want the reply", rep, ok)
		}
	})
	t.Run("gives up after waitTicks ticks", func(t *testing.T) {
		c := newWaitClock()
		ch := make(chan *actors.Reply)
		done := make(chan bool)
		go func() {
			_, ok := c.wait(ch)
			done <- ok
		}()
		// Fewer ticks than waitTicks can never end the wait, however the
		// waiter was scheduled: it counts at most one per tick.
		for range waitTicks - 1 {
			c.tick()
		}
		select {
		case <-done:
			t.Fatalf("the wait ended after %d ticks", waitTicks-1)
		default:
		}
		// A waiter that slept through some ticks counted fewer: tick on
		// until it has seen enough.
		for i := 0; ; i++ {
			c.tick()
			runtime.Gosched()
			select {
			case ok := <-done:
				if ok {
					t.Fatal("the wait reported a reply")
				}
				return
			default:
			}
			if i > 1_000_000 {
				t.Fatal("the wait never ended")
			}
		}
	})
	t.Run("stopped", func(t *testing.T) {
		c := newWaitClock()
		stop := make(chan struct{})
		ended := make(chan struct{})
		go func() {
			c.run(24*time.Hour, stop) // a day: only the stop ends a wait here
			close(ended)
		}()
		close(stop)
		<-ended
		if _, ok := c.wait(make(chan *actors.Reply)); ok {
			t.Fatal("a wait on a stopped clock reported a reply")
		}
		// Every look at a stopped clock sees a tick: a reply there wins.
		for range 100 {
			ch := make(chan *actors.Reply, 1)
			ch <- &actors.Reply{}
			if _, ok := c.wait(ch); !ok {
				t.Fatal("a reply beside a stopped clock was not taken")
			}
		}
	})
}
