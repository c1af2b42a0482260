package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/eventd/eventd/bench/scaling/internal/lat"
	"github.com/eventd/eventd/bench/scaling/internal/load"
)

func run(dur time.Duration, keys int, etcdBin string) error {
	dir, err := os.MkdirTemp("", "scaling-grains-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	etcdCmd, err := startEtcd(etcdBin, dir)
	if etcdCmd != nil {
		defer func() { etcdCmd.Process.Kill(); etcdCmd.Wait() }()
	}
	if err != nil {
		return err
	}
	fmt.Printf("# grains spike: etcd up on %s, load %s\n", etcdClient, lat.Load())

	self, _ := os.Executable()
	var children []*exec.Cmd
	for i := 1; i <= 2; i++ {
		cmd := exec.Command(self, "-member", fmt.Sprint(i))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		children = append(children, cmd)
	}
	defer func() {
		for _, c := range children {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
		}
	}()
	c := startMember(0)
	defer c.Shutdown(true)
	start := time.Now()
	for c.MemberList.Length() < 3 {
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("only %d members after 30 s", c.MemberList.Length())
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("# 3 members joined in %s\n", time.Since(start).Round(time.Millisecond))

	// Place every identity once and sort by the member that hosts it.
	byAddr := map[string][]string{}
	for k := 0; k < keys; k++ {
		id := fmt.Sprintf("key-%04d", k)
		pid := c.Get(id, kind)
		if pid == nil {
			return fmt.Errorf("no placement for %s", id)
		}
		byAddr[pid.Address] = append(byAddr[pid.Address], id)
	}
	local := byAddr[c.ActorSystem.Address()]
	var remoteIDs []string
	victim := fmt.Sprintf("127.0.0.1:%d", basePort+2) // child 2, killed at the end
	for addr, ids := range byAddr {
		fmt.Printf("# member %s hosts %d of %d keys\n", addr, len(ids), keys)
		if addr != c.ActorSystem.Address() {
			remoteIDs = append(remoteIDs, ids...)
		}
	}

	// Today's path: a local actor, Send with a pooled reply channel.
	measureLocalActor(c, dur)
	call := func(ids []string) func(w, i int) error {
		return func(w, i int) error {
			_, err := c.Request(ids[(w*7919+i)%len(ids)], kind, &wrapperspb.BytesValue{Value: event})
			return err
		}
	}
	for _, workers := range []int{1, 64} {
		for _, set := range []struct {
			name string
			ids  []string
		}{{"grain on this member", local}, {"grain on another member", remoteIDs}} {
			load.Run(workers, dur/5, call(set.ids)) // warm-up: activations, connections
			r := load.Run(workers, dur, call(set.ids))
			fmt.Println(lat.Line(fmt.Sprintf("%s, %d callers", set.name, workers), r.Ops, "calls", r.Elapsed, r.Lat))
			if r.Errors > 0 {
				fmt.Printf("  %d errors\n", r.Errors)
			}
		}
	}
	return killAndRehome(c, children[1], byAddr[victim])
}

// measureLocalActor is the baseline: eventd's handler-to-key-actor hop.
func measureLocalActor(c *cluster.Cluster, dur time.Duration) {
	type req struct{ reply chan int64 }
	var n int64
	pid := c.ActorSystem.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*req); ok {
			n++
			m.reply <- n
		}
	}))
	op := func(w, i int) error {
		r := &req{reply: make(chan int64, 1)}
		c.ActorSystem.Root.Send(pid, r)
		<-r.reply
		return nil
	}
	for _, workers := range []int{1, 64} {
		load.Run(workers, dur/5, op)
		r := load.Run(workers, dur, op)
		fmt.Println(lat.Line(fmt.Sprintf("local actor (today), %d callers", workers), r.Ops, "calls", r.Elapsed, r.Lat))
	}
}

// killAndRehome kills the member hosting ids with SIGKILL and measures how
// long until a call to one of its keys succeeds again, and what the
// re-activated grain's in-memory count is (the state a key actor loses).
func killAndRehome(c *cluster.Cluster, victim *exec.Cmd, ids []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("the victim hosts no key")
	}
	id := ids[0]
	var before int64
	for i := 0; i < 100; i++ {
		res, err := c.Request(id, kind, &wrapperspb.BytesValue{Value: event})
		if err != nil {
			return err
		}
		before = res.(*wrapperspb.Int64Value).Value
	}
	killed := time.Now()
	victim.Process.Signal(syscall.SIGKILL)
	victim.Wait()
	attempts, failed := 0, 0
	for time.Since(killed) < 60*time.Second {
		attempts++
		res, err := c.Request(id, kind, &wrapperspb.BytesValue{Value: event}, cluster.WithTimeout(500*time.Millisecond), cluster.WithRetryCount(1))
		if err == nil {
			fmt.Printf("kill -9 of the member hosting %s: served again after %s (%d attempts, %d failed), members %d; count before %d, after %d (in-memory state lost)  load %s\n",
				id, time.Since(killed).Round(time.Millisecond), attempts, failed, c.MemberList.Length(),
				before, res.(*wrapperspb.Int64Value).Value, lat.Load())
			return nil
		}
		failed++
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s not served 60 s after the kill", id)
}
