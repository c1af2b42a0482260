// Command grains measures protoactor-go's cluster as eventd's key actors
// would use it: three members on loopback (this process and two children),
// etcd membership (an etcd it starts itself in a temporary directory),
// disthash identity lookup (rendezvous hashing of the identity over the
// members), and a grain kind "key" standing in for a key actor. It reports
// the round trip and throughput of grain calls whose grain lives on the
// calling member and on another member, next to today's local actor call
// (Send with a reply channel), and what happens to a key's grain and its
// in-memory state when the member holding it is killed with SIGKILL.
//
// It is a spike for docs/scaling.md, never on eventd's serving path.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	etcdClient = "127.0.0.1:23790"
	etcdPeer   = "127.0.0.1:23800"
	basePort   = 23101 // member i listens on basePort+i
	kind       = "key"
)

func main() {
	member := flag.Int("member", 0, "internal: run as child member number (1 or 2) until killed")
	dur := flag.Duration("d", 3*time.Second, "duration of each measured run")
	keys := flag.Int("keys", 600, "grain identities (API keys) to spread over the members")
	etcdBin := flag.String("etcd", "etcd", "etcd binary (Debian: apt-get install etcd-server)")
	flag.Parse()
	if *member > 0 {
		runChild(*member)
		return
	}
	if err := run(*dur, *keys, *etcdBin); err != nil {
		fmt.Fprintln(os.Stderr, "grains:", err)
		os.Exit(1)
	}
}

// startMember joins the cluster as member i (0-based) and returns it.
func startMember(i int) *cluster.Cluster {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	provider, err := etcd.NewWithConfig("/eventd-spike", clientv3.Config{
		Endpoints: []string{etcdClient}, DialTimeout: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	cfg := cluster.Configure("eventd", provider, disthash.New(),
		remote.Configure("127.0.0.1", basePort+i),
		cluster.WithKinds(cluster.NewKind(kind, actor.PropsFromProducer(newKeyGrain))),
		cluster.WithRequestTimeout(2*time.Second))
	c := cluster.New(system, cfg)
	c.StartMember()
	return c
}

// runChild is a member that only hosts grains, until it is killed.
func runChild(i int) {
	c := startMember(i)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	c.Shutdown(true)
}

// keyGrain stands in for a key actor: it counts the requests it admitted,
// in memory, as the sliding windows do between their saves.
type keyGrain struct{ count int64 }

func newKeyGrain() actor.Actor { return &keyGrain{} }

// Receive answers each event with the grain's running count.
func (g *keyGrain) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*wrapperspb.BytesValue); ok {
		g.count++
		ctx.Respond(wrapperspb.Int64(g.count))
	}
}

// startEtcd runs a one-node etcd on loopback ports in dir.
func startEtcd(bin, dir string) (*exec.Cmd, error) {
	cmd := exec.Command(bin,
		"--name", "spike", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://"+etcdClient, "--advertise-client-urls", "http://"+etcdClient,
		"--listen-peer-urls", "http://"+etcdPeer, "--initial-advertise-peer-urls", "http://"+etcdPeer,
		"--initial-cluster", "spike=http://"+etcdPeer, "--logger", "zap", "--log-level", "error")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdClient}, DialTimeout: 5 * time.Second})
	if err != nil {
		return cmd, err
	}
	defer cli.Close()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err = cli.Get(cli.Ctx(), "probe"); err == nil {
			return cmd, nil
		}
	}
	return cmd, fmt.Errorf("etcd not ready: %w", err)
}

// event is a 230-byte stand-in for an event, as the request to a key actor.
var event = []byte(strings.Repeat("e", 230))
