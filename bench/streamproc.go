package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The stream scenario's subscribers run in a child process of the bench
// (SubscriberProcess), so that the CPU they burn reading 100 connections is
// measured apart from the server's and the load generator's: in-process it was
// booked as the generator's. The child is the bench binary itself, started
// with a hidden flag (ServeSubscribers is its side); the parent reads the
// child's CPU from /proc/<pid>/stat at Mark and once the run has drained,
// exactly as it reads the server's.
//
// They talk in lines. The child prints "ready" (or "error <text>") once every
// subscriber is connected, then "d <n>" every 100 ms with the messages
// delivered so far, and answers the parent's commands:
//
//	mark                       -> ok
//	drain <want> <idle> <max>  -> ok      (durations in ns; WaitDrained)
//	stop                       -> r <StreamResult as JSON>
//
// It exits when its stdin closes (also when the parent dies).

// SubscriberProcess is a set of /stream subscribers in a child process.
type SubscriberProcess struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	replies   chan string
	delivered atomic.Uint64
	readDone  chan struct{}
	cpu0      time.Duration
	cpu0OK    bool
	cpu       time.Duration // from Mark to the end of WaitDrained
	cpuOK     bool
	waitOnce  sync.Once
}

// StartSubscriberProcess starts argv (the bench binary and its hidden flag,
// to which the options are appended as JSON) and returns once its
// subscribers are all connected.
func StartSubscriberProcess(ctx context.Context, argv []string, o StreamOptions) (*SubscriberProcess, error) {
	opts, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], append(argv[1:len(argv):len(argv)], string(opts))...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &SubscriberProcess{cmd: cmd, stdin: stdin, replies: make(chan string, 4), readDone: make(chan struct{})}
	go p.read(stdout)
	line, err := p.reply(ctx, 2*time.Minute)
	if err == nil && line != "ready" {
		err = errors.New(strings.TrimPrefix(line, "error "))
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("bench: subscriber process: %w", err)
	}
	return p, nil
}

func (p *SubscriberProcess) read(r io.Reader) {
	defer close(p.readDone)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // the result line holds histograms
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "d "); ok {
			if v, err := strconv.ParseUint(n, 10, 64); err == nil {
				p.delivered.Store(v)
			}
			continue
		}
		p.replies <- line
	}
}

// reply waits for the child's next answer.
func (p *SubscriberProcess) reply(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line := <-p.replies:
		return line, nil
	case <-p.readDone:
		select {
		case line := <-p.replies:
			return line, nil
		default:
		}
		return "", errors.New("the child exited")
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return "", errors.New("no answer from the child")
	}
}

func (p *SubscriberProcess) command(ctx context.Context, cmd string, timeout time.Duration) (string, error) {
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		return "", err
	}
	return p.reply(ctx, timeout)
}

// Pid is the child's process id.
func (p *SubscriberProcess) Pid() int { return p.cmd.Process.Pid }

// Mark starts the clocks of the subscribers (see Subscribers.Mark) and of
// their CPU.
func (p *SubscriberProcess) Mark() {
	_, _ = p.command(context.Background(), "mark", 10*time.Second)
	p.cpu0, p.cpu0OK = procCPUOK(p.Pid())
}

// Delivered is the number of event messages received so far, as of the
// child's last report (at most 100 ms old).
func (p *SubscriberProcess) Delivered() uint64 { return p.delivered.Load() }

// WaitDrained is Subscribers.WaitDrained in the child; the subscribers' CPU
// is read once it returns.
func (p *SubscriberProcess) WaitDrained(ctx context.Context, want uint64, idle, max time.Duration) {
	_, _ = p.command(ctx, fmt.Sprintf("drain %d %d %d", want, idle, max), max+10*time.Second)
	if c, ok := procCPUOK(p.Pid()); ok && p.cpu0OK {
		p.cpu, p.cpuOK = c-p.cpu0, true
	}
}

// Stop closes the connections, ends the child and returns what the
// subscribers saw, with their CPU from Mark to the end of WaitDrained.
func (p *SubscriberProcess) Stop() *StreamResult {
	line, err := p.command(context.Background(), "stop", 30*time.Second)
	p.kill()
	r := &StreamResult{}
	if js, ok := strings.CutPrefix(line, "r "); err == nil && ok {
		var w streamWire
		if json.Unmarshal([]byte(js), &w) == nil {
			r = w.result()
		}
	}
	r.ClientCPU, r.HasClientCPU = p.cpu, p.cpuOK
	return r
}

// kill closes the child's stdin (it exits), and kills it if it lingers.
func (p *SubscriberProcess) kill() {
	p.waitOnce.Do(func() {
		p.stdin.Close()
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
}

func procCPUOK(pid int) (time.Duration, bool) {
	d, err := ProcCPU(pid)
	return d, err == nil
}

// ServeSubscribers is the child's side: optsJSON holds the StreamOptions;
// commands come from in, answers go to out. It returns the exit code.
func ServeSubscribers(optsJSON string, in io.Reader, out io.Writer) int {
	var o StreamOptions
	var mu sync.Mutex // out is written by the reporter and the command loop
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(out, line+"\n")
	}
	if err := json.Unmarshal([]byte(optsJSON), &o); err != nil {
		say("error bad options: " + err.Error())
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subs, err := StartSubscribers(ctx, o)
	if err != nil {
		say("error " + strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	say("ready")
	stopReports := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopReports:
				return
			case <-t.C:
				say("d " + strconv.FormatUint(subs.Delivered(), 10))
			}
		}
	}()
	stopped := false
	defer func() {
		close(stopReports)
		<-reported
		if !stopped {
			subs.Stop()
		}
	}()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "mark":
			subs.Mark()
			say("ok")
		case "drain":
			var v [3]int64
			for i := range v {
				if i+1 < len(f) {
					v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
				}
			}
			subs.WaitDrained(ctx, uint64(v[0]), time.Duration(v[1]), time.Duration(v[2]))
			say("ok")
		case "stop":
			if stopped {
				say("error stopped")
				continue
			}
			stopped = true
			b, err := json.Marshal(wireOf(subs.Stop()))
			if err != nil {
				say("error " + err.Error())
				continue
			}
			say("r " + string(b))
		default:
			say("error unknown command " + f[0])
		}
	}
	return 0
}

// streamWire carries a StreamResult, histograms included, from the child.
type streamWire struct {
	Subscribers    int
	Delivered      uint64
	Elapsed        time.Duration
	Latency        histWire
	CreatedLatency histWire
	Closes         map[string]uint64
	SlowConsumer   uint64
	Reconnects     uint64
	DialErrors     uint64
	Acks           uint64
	AckErrors      uint64
	PerSecond      []uint64
}

type histWire struct {
	Counts  map[int]uint64 // non-empty buckets only
	Count   uint64
	Sum     uint64
	Min     int64
	Max     int64
	Clamped uint64
}

func histOf(h *Histogram) histWire {
	w := histWire{Counts: map[int]uint64{}, Count: h.count, Sum: h.sum, Min: h.min, Max: h.max, Clamped: h.clamped}
	for i, c := range h.counts {
		if c != 0 {
			w.Counts[i] = c
		}
	}
	return w
}

func (w histWire) histogram() Histogram {
	h := Histogram{count: w.Count, sum: w.Sum, min: w.Min, max: w.Max, clamped: w.Clamped}
	for i, c := range w.Counts {
		if i >= 0 && i < len(h.counts) {
			h.counts[i] = c
		}
	}
	return h
}

func wireOf(r *StreamResult) streamWire {
	return streamWire{Subscribers: r.Subscribers, Delivered: r.Delivered, Elapsed: r.Elapsed,
		Latency: histOf(&r.Latency), CreatedLatency: histOf(&r.CreatedLatency), Closes: r.Closes,
		SlowConsumer: r.SlowConsumer, Reconnects: r.Reconnects, DialErrors: r.DialErrors, Acks: r.Acks, AckErrors: r.AckErrors,
		PerSecond: r.PerSecond}
}

func (w *streamWire) result() *StreamResult {
	r := &StreamResult{Subscribers: w.Subscribers, Delivered: w.Delivered, Elapsed: w.Elapsed,
		Latency: w.Latency.histogram(), CreatedLatency: w.CreatedLatency.histogram(), Closes: w.Closes,
		SlowConsumer: w.SlowConsumer, Reconnects: w.Reconnects, DialErrors: w.DialErrors, Acks: w.Acks, AckErrors: w.AckErrors,
		PerSecond: w.PerSecond}
	if r.Closes == nil {
		r.Closes = map[string]uint64{}
	}
	return r
}
