package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// raftCommitter is a 3-member group of etcd's raft library in this
// process: each member appends its new entries and hard state to its own
// log file and fsyncs it before sending its messages (Raft's rule), so an
// entry is committed once two members have it on disk. Messages go
// through in-process channels: the figure is the library and the fsyncs,
// without a network (JetStream's figure has loopback TCP).
type raftCommitter struct {
	dir     string
	members []*raftMember
	seq     atomic.Uint64
	waiters sync.Map // proposal id -> chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
}

// raftMember is one member: the library's node, its memory storage (the
// library's read side) and its durable log file (the write side).
type raftMember struct {
	node    raft.Node
	storage *raft.MemoryStorage
	log     *os.File
	inbox   chan raftpb.Message
}

func startRaft() (committer, error) {
	dir, err := os.MkdirTemp("", "scaling-raft-")
	if err != nil {
		return nil, err
	}
	c := &raftCommitter{dir: dir, stop: make(chan struct{})}
	peers := []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	for id := uint64(1); id <= 3; id++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("log-%d", id)))
		if err != nil {
			return nil, err
		}
		st := raft.NewMemoryStorage()
		n := raft.StartNode(&raft.Config{
			ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: st,
			MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: 1 << 30,
			Logger: &raft.DefaultLogger{Logger: discardLog},
		}, peers)
		c.members = append(c.members, &raftMember{node: n, storage: st, log: f, inbox: make(chan raftpb.Message, 8192)})
	}
	for i := range c.members {
		c.wg.Add(1)
		go c.run(i)
	}
	// Member 1 leads, as a partition's owner would.
	c.members[0].node.Campaign(context.Background())
	for deadline := time.Now().Add(10 * time.Second); c.members[0].node.Status().Lead != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no raft leader")
		}
	}
	fmt.Printf("# raft group up, leader 1, load %s\n", loadNow())
	return c, nil
}

// run is one member's loop: ticks, inbound messages, and Ready handling
// (persist + fsync, then send, then apply).
func (c *raftCommitter) run(i int) {
	defer c.wg.Done()
	m := c.members[i]
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			m.node.Tick()
		case msg := <-m.inbox:
			// Step everything queued before the next Ready, so that one
			// fsync covers all of it: the group commit a real transport's
			// read loop gives.
			m.node.Step(context.Background(), msg)
			for drained := false; !drained; {
				select {
				case msg := <-m.inbox:
					m.node.Step(context.Background(), msg)
				default:
					drained = true
				}
			}
		case rd := <-m.node.Ready():
			if len(rd.Entries) > 0 || !raft.IsEmptyHardState(rd.HardState) {
				for _, e := range rd.Entries {
					b, _ := e.Marshal()
					m.log.Write(b)
				}
				hs, _ := rd.HardState.Marshal()
				m.log.Write(hs)
				m.log.Sync()
			}
			m.storage.Append(rd.Entries)
			if !raft.IsEmptyHardState(rd.HardState) {
				m.storage.SetHardState(rd.HardState)
			}
			for _, msg := range rd.Messages {
				select {
				case c.members[msg.To-1].inbox <- msg:
				default: // a full inbox drops, as a lossy network would; raft retries
				}
			}
			if i == 0 {
				for _, e := range rd.CommittedEntries {
					if e.Type == raftpb.EntryNormal && len(e.Data) >= 8 {
						if ch, ok := c.waiters.LoadAndDelete(binary.BigEndian.Uint64(e.Data)); ok {
							close(ch.(chan struct{}))
						}
					}
				}
			}
			m.node.Advance()
		}
	}
}

func (c *raftCommitter) commit(_ int, payload []byte) error {
	id := c.seq.Add(1)
	data := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint64(data, id)
	copy(data[8:], payload)
	ch := make(chan struct{})
	c.waiters.Store(id, ch)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.members[0].node.Propose(ctx, data); err != nil {
		c.waiters.Delete(id)
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		c.waiters.Delete(id)
		return ctx.Err()
	}
}

func (c *raftCommitter) close() {
	close(c.stop)
	c.wg.Wait()
	for _, m := range c.members {
		m.node.Stop()
		m.log.Close()
	}
	os.RemoveAll(c.dir)
}
