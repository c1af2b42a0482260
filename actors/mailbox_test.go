package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

type blockingActor struct{ release chan struct{} }

func (b *blockingActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(int); ok {
		<-b.release
	}
}

// The depth read at scrape time follows the mailbox: messages behind a busy
// actor count, and the count returns to 0 once they are handled.
func TestMailboxDepth(t *testing.T) {
	system := actor.NewActorSystem()
	var mb mailboxHeld
	if mb.depth() != 0 {
		t.Fatal("depth before spawn")
	}
	b := &blockingActor{release: make(chan struct{})}
	pid := system.Root.Spawn(mb.props(func() actor.Actor { return b }))
	for i := 0; i < 3; i++ {
		system.Root.Send(pid, i)
	}
	waitDepth(t, &mb, 2) // the first is being handled
	close(b.release)
	waitDepth(t, &mb, 0)
	_ = system.Root.PoisonFuture(pid).Wait()
}

func waitDepth(t *testing.T, mb *mailboxHeld, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for mb.depth() != want {
		if time.Now().After(deadline) {
			t.Fatalf("depth %d, want %d", mb.depth(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
