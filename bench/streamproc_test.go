package bench

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"
)

// TestSubscriberChild is not a test: it is the child process of
// TestSubscriberProcess (the test binary started again, as the bench starts
// itself with its hidden flag).
func TestSubscriberChild(t *testing.T) {
	if os.Getenv("EVENTD_BENCH_SUBSCRIBER_CHILD") != "1" {
		t.Skip("helper process")
	}
	args := flag.Args()
	os.Exit(ServeSubscribers(args[len(args)-1], os.Stdin, os.Stdout))
}

// TestSubscriberProcess: subscribers in a child process report what the
// in-process ones do (see TestSubscribersReconnectWithSince), histograms
// included, plus the CPU they used.
func TestSubscriberProcess(t *testing.T) {
	url := streamServer(t)
	t.Setenv("EVENTD_BENCH_SUBSCRIBER_CHILD", "1")
	argv := []string{os.Args[0], "-test.run=^TestSubscriberChild$", "--"}
	ctx := context.Background()
	if _, err := StartSubscriberProcess(ctx, argv, StreamOptions{Target: url, Key: "wrong", Subscribers: 1}); err == nil {
		t.Fatal("a refused upgrade in the child was not reported")
	}
	p, err := StartSubscriberProcess(ctx, argv, StreamOptions{Target: url, Key: "sk_live_t", Subscribers: 3, Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Mark()
	p.WaitDrained(ctx, 30, time.Minute, time.Minute)
	r := p.Stop()
	if r.Subscribers != 3 || r.Delivered != 30 || r.Latency.Count() != 30 || r.CreatedLatency.Count() != 30 {
		t.Errorf("delivered %d, latencies %d/%d", r.Delivered, r.Latency.Count(), r.CreatedLatency.Count())
	}
	if r.Latency.Max() <= 0 || r.Latency.Percentile(50) <= 0 {
		t.Errorf("latency histogram lost on the way: max %v p50 %v", r.Latency.Max(), r.Latency.Percentile(50))
	}
	if r.Closes["4008"] != 3 || r.Reconnects != 3 || r.SlowConsumer != 3 || r.DialErrors != 0 {
		t.Errorf("closes %v reconnects %d slow %d dial errors %d", r.Closes, r.Reconnects, r.SlowConsumer, r.DialErrors)
	}
	if !r.HasClientCPU || r.ClientCPU < 0 {
		t.Errorf("subscriber CPU not measured: %v %v", r.ClientCPU, r.HasClientCPU)
	}
	if p.cmd.ProcessState == nil {
		t.Error("the child is still running after Stop")
	}
}

// TestStreamWireKeepsCursorCounts: the acks a cursor consumer child sent
// reach the parent.
func TestStreamWireKeepsCursorCounts(t *testing.T) {
	r := &StreamResult{Subscribers: 2, Delivered: 9, Acks: 4, AckErrors: 1, Closes: map[string]uint64{}}
	w := wireOf(r)
	got := w.result()
	if got.Acks != 4 || got.AckErrors != 1 || got.Delivered != 9 {
		t.Errorf("%+v", got)
	}
	m := &StreamResult{}
	m.Merge(got)
	m.Merge(got)
	if m.Acks != 8 || m.AckErrors != 2 {
		t.Errorf("merged acks %d errors %d", m.Acks, m.AckErrors)
	}
}
