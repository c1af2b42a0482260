package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/eventd/eventd/bench/scaling/internal/lat"
)

// jsCommitter publishes to an R3 stream of a 3-node JetStream cluster
// embedded in this process (three servers, loopback routes). A publish
// returns when the stream leader has the message stored on a quorum.
type jsCommitter struct {
	dir     string
	servers []*server.Server
	conns   []*nats.Conn
	js      []nats.JetStreamContext
}

const (
	clientPort  = 24222 // + node index
	clusterPort = 26222 // + node index
	subject     = "events.ingest"
)

// startJetStream starts the cluster; syncAlways sets sync_interval: always
// (fsync on every write), without it JetStream syncs every 2 minutes and a
// quorum ack means "in the memory of two processes", not "on two disks".
func startJetStream(syncAlways bool) (committer, error) {
	dir, err := os.MkdirTemp("", "scaling-nats-")
	if err != nil {
		return nil, err
	}
	c := &jsCommitter{dir: dir}
	var routes []*url.URL
	for i := 0; i < 3; i++ {
		u, _ := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", clusterPort+i))
		routes = append(routes, u)
	}
	for i := 0; i < 3; i++ {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       clientPort + i,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprint(i)),
			Cluster:    server.ClusterOpts{Name: "eventd", Host: "127.0.0.1", Port: clusterPort + i},
			Routes:     routes,
			NoLog:      true,
			NoSigs:     true,
			SyncAlways: syncAlways,
		}
		if syncAlways {
			opts.SyncInterval = 2 * time.Minute // ignored when SyncAlways; the parser sets both
		}
		s, err := server.NewServer(opts)
		if err != nil {
			return nil, err
		}
		go s.Start()
		c.servers = append(c.servers, s)
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(20 * time.Second) {
			return nil, fmt.Errorf("server %s not ready", s.Name())
		}
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", clientPort))
	if err != nil {
		return nil, err
	}
	js, err := nc.JetStream()
	if err != nil {
		return nil, err
	}
	// The meta leader is elected after the routes form: retry the create.
	var info *nats.StreamInfo
	for deadline := time.Now().Add(30 * time.Second); ; {
		info, err = js.AddStream(&nats.StreamConfig{
			Name: "EVENTS", Subjects: []string{"events.>"}, Replicas: 3, Storage: nats.FileStorage,
		})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("add stream: %w", err)
	}
	for info.Cluster == nil || info.Cluster.Leader == "" {
		time.Sleep(100 * time.Millisecond)
		if info, err = js.StreamInfo("EVENTS"); err != nil {
			return nil, err
		}
	}
	nc.Close()
	// Publish through the stream leader's server, as the owner of a
	// partition would (its own node leads its stream): the figure is the
	// replication's cost, not an extra client hop.
	leader := 0
	for i, s := range c.servers {
		if s.Name() == info.Cluster.Leader {
			leader = i
		}
	}
	fmt.Printf("# JetStream R3 up, stream leader %s, sync always %v, load %s\n", info.Cluster.Leader, syncAlways, loadNow())
	// One connection per 16 writers: one connection's socket would
	// serialise 64 writers and measure the client, not the commit.
	for i := 0; i < 4; i++ {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", clientPort+leader))
		if err != nil {
			return nil, err
		}
		js, err := nc.JetStream()
		if err != nil {
			return nil, err
		}
		c.conns = append(c.conns, nc)
		c.js = append(c.js, js)
	}
	return c, nil
}

func (c *jsCommitter) commit(worker int, payload []byte) error {
	_, err := c.js[worker/16%len(c.js)].Publish(subject, payload)
	return err
}

func (c *jsCommitter) close() {
	for _, nc := range c.conns {
		nc.Close()
	}
	for _, s := range c.servers {
		s.Shutdown()
	}
	for _, s := range c.servers {
		s.WaitForShutdown()
	}
	os.RemoveAll(c.dir)
}

func loadNow() string { return lat.Load() }
