// Command commit measures what a replicated commit point would cost eventd:
// an embedded 3-node NATS JetStream cluster (R3 stream, publish with ack)
// against a local Pebble Sync commit of the same 230-byte events, on the
// same machine, singly and in batches of 100 (one message or one Pebble
// batch holding the 100 events, as a shard's group commit would write).
//
// A third replicated target is a 3-member group of etcd's raft library
// (go.etcd.io/raft/v3) with a fsynced log file per member.
//
// It is a spike for docs/scaling.md, never on eventd's serving path.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eventd/eventd/bench/scaling/internal/lat"
	"github.com/eventd/eventd/bench/scaling/internal/load"
)

// event is a 230-byte stand-in for eventd's stored record.
var event = []byte(strings.Repeat("e", 230))

// batch is 100 events in one payload: the unit a shard commits.
var batch = []byte(strings.Repeat(string(event), 100))

// scenario is one row: a name, a concurrency and a payload of n events.
type scenario struct {
	name    string
	workers int
	events  int
}

var scenarios = []scenario{
	{"single, 1 writer", 1, 1},
	{"single, 64 writers", 64, 1},
	{"batch of 100, 16 writers", 16, 100},
}

func main() {
	dur := flag.Duration("d", 3*time.Second, "duration of each measured run")
	only := flag.String("only", "pebble,nats,nats-sync,raft", "comma-separated targets: pebble, nats (JetStream default sync), nats-sync (sync_interval: always), raft (etcd raft library, fsync per Ready)")
	flag.Parse()

	fmt.Printf("# commit spike, %d-byte events, runs of %s, start load %s\n", len(event), *dur, lat.Load())
	for _, target := range strings.Split(*only, ",") {
		var c committer
		var err error
		switch target {
		case "pebble":
			c, err = openPebble()
		case "nats":
			c, err = startJetStream(false)
		case "nats-sync":
			c, err = startJetStream(true)
		case "raft":
			c, err = startRaft()
		default:
			err = fmt.Errorf("unknown target %q", target)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "commit:", target, err)
			os.Exit(1)
		}
		for _, s := range scenarios {
			payload := event
			if s.events > 1 {
				payload = batch
			}
			// Warm-up, unrecorded: connections, leaders, the first files.
			load.Run(s.workers, *dur/5, func(w, i int) error { return c.commit(w, payload) })
			r := load.Run(s.workers, *dur, func(w, i int) error { return c.commit(w, payload) })
			fmt.Println(lat.Line(target+": "+s.name, r.Ops*s.events, "events", r.Elapsed, r.Lat))
			if r.Errors > 0 {
				fmt.Printf("  %d errors\n", r.Errors)
			}
		}
		c.close()
	}
}

// committer is one commit point: commit returns once the payload is
// durable by that target's definition.
type committer interface {
	commit(worker int, payload []byte) error
	close()
}
