// Command tracegaps reads a Go execution trace of eventd (the admin API's
// /debug/pprof/trace, or eventd-bench --trace) and says where the process
// waited rather than computed: how much of the time 0, 1, 2... Ps ran, the
// WAL's fdatasync calls and the gaps between them, and the stretches with
// no P running at all. A CPU profile cannot show those: it samples only
// what runs. Session 16 found the WAL's min-sync timer firing a
// millisecond late this way (docs/benchmarks.md). With -blocked it sums
// instead how long goroutines waited, by the stack they blocked in: session
// 41 found every shard's commit waiting on the derived checkpoint's lock
// (-blocked='derived).fold').
//
//	cd tools/tracegaps && go run . [-timeline 1000,20,100] FILE.trace
//	cd tools/tracegaps && go run . -blocked='shard).flush' FILE.trace
//
// It is its own module so that golang.org/x/exp, which it needs for the
// trace parser, stays out of eventd's dependency graph.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	timeline := flag.String("timeline", "", "start_ms,len_ms,bin_us: also print goroutine states per bin for that window")
	blocked := flag.String("blocked", "", "instead: sum the time goroutines waited, by the stack they blocked in, for stacks containing this text (\"\" for all: -blocked=)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: tracegaps [-timeline start_ms,len_ms,bin_us | -blocked TEXT] FILE.trace")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	if isFlagSet("blocked") {
		bs, err := Blocked(f, *blocked)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracegaps:", err)
			os.Exit(1)
		}
		for i, b := range bs {
			if i == 20 {
				break
			}
			fmt.Println(b)
		}
		return
	}
	var win *window
	if *timeline != "" {
		if win, err = parseWindow(*timeline); err != nil {
			fmt.Fprintln(os.Stderr, "tracegaps: -timeline:", err)
			os.Exit(2)
		}
	}
	s, err := Summarize(f, win)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracegaps:", err)
		os.Exit(1)
	}
	fmt.Print(s)
	if win != nil {
		fmt.Print(win)
	}
}

// Stats is what Summarize finds in a trace.
type Stats struct {
	Duration  time.Duration
	PsRunning []time.Duration // PsRunning[n]: time with exactly n Ps running
	Fsyncs    []time.Duration // each fdatasync's duration, in order
	SyncGaps  []time.Duration // end of one fdatasync to the start of the next
	IdleGaps  []time.Duration // stretches with no P running
}

// LongIdle is the idle stretch worth counting: far longer than the
// runtime's own hand-offs between goroutines, half of the millisecond an
// idle process rounds a short timer up to.
const LongIdle = 500 * time.Microsecond

// Summarize reads a trace; win, if not nil, also collects its timeline.
func Summarize(r io.Reader, win *window) (*Stats, error) {
	s := &Stats{}
	procs := map[trace.ProcID]bool{} // running
	running := 0
	fsyncStart := map[trace.GoID]trace.Time{}
	var first, last, lastSyncEnd, lastProcAt, idleStart trace.Time
	err := eachEvent(r, func(ev trace.Event) {
		if first == 0 {
			first = ev.Time()
			lastProcAt, idleStart = first, first
		}
		last = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			return
		}
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case trace.ResourceProc:
			for len(s.PsRunning) <= running {
				s.PsRunning = append(s.PsRunning, 0)
			}
			s.PsRunning[running] += time.Duration(ev.Time() - lastProcAt)
			lastProcAt = ev.Time()
			_, to := st.Proc()
			id := st.Resource.Proc()
			was := procs[id]
			now := to == trace.ProcRunning
			procs[id] = now
			switch {
			case was && !now:
				running--
				if running == 0 {
					idleStart = ev.Time()
				}
			case !was && now:
				if running == 0 {
					s.IdleGaps = append(s.IdleGaps, time.Duration(ev.Time()-idleStart))
				}
				running++
			}
		case trace.ResourceGoroutine:
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			// Only a transition out of Syscall ends the call, and only one
			// into it from another state begins one.
			if t0, ok := fsyncStart[id]; ok && from == trace.GoSyscall && to != trace.GoSyscall {
				s.Fsyncs = append(s.Fsyncs, time.Duration(ev.Time()-t0))
				if lastSyncEnd != 0 {
					s.SyncGaps = append(s.SyncGaps, time.Duration(t0-lastSyncEnd))
				}
				lastSyncEnd = ev.Time()
				delete(fsyncStart, id)
			}
			fsync := to == trace.GoSyscall && inStack(ev.Stack(), fsyncFunc)
			if fsync && from != trace.GoSyscall {
				fsyncStart[id] = ev.Time()
			}
			if win != nil {
				win.add(ev, first, id, to, fsync)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	s.Duration = time.Duration(last - first)
	return s, nil
}

// eachEvent calls fn with each event of the trace r, in order.
func eachEvent(r io.Reader, fn func(trace.Event)) error {
	tr, err := trace.NewReader(r)
	if err != nil {
		return err
	}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fn(ev)
	}
}

// fsyncFunc is the call Pebble's WAL syncs through.
const fsyncFunc = "unix.Fdatasync"

func inStack(st trace.Stack, fn string) bool {
	for f := range st.Frames() {
		if strings.Contains(f.Func, fn) {
			return true
		}
	}
	return false
}

// String prints the summary.
func (s *Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace of %v\n", s.Duration.Round(time.Millisecond))
	for n, d := range s.PsRunning {
		fmt.Fprintf(&b, "  %d Ps running: %5.1f%% of the time\n", n, share(d, s.Duration))
	}
	fmt.Fprintf(&b, "fdatasync: %d (%.0f a second); took %s\n", len(s.Fsyncs), float64(len(s.Fsyncs))/s.Duration.Seconds(), quantiles(s.Fsyncs))
	fmt.Fprintf(&b, "  from the end of one to the start of the next: %s\n", quantiles(s.SyncGaps))
	var long []time.Duration
	var sum time.Duration
	for _, g := range s.IdleGaps {
		if g >= LongIdle {
			long = append(long, g)
			sum += g
		}
	}
	fmt.Fprintf(&b, "no P running for %v or more: %d times, %.1f%% of the time; %s\n", LongIdle, len(long), share(sum, s.Duration), quantiles(long))
	return b.String()
}

func share(d, of time.Duration) float64 {
	if of <= 0 {
		return 0
	}
	return 100 * float64(d) / float64(of)
}

func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))].Round(time.Microsecond) }
	return fmt.Sprintf("p50 %v, p90 %v, p99 %v", q(0.5), q(0.9), q(0.99))
}

// window is the optional timeline: per bin, the mean number of goroutines
// running, runnable, waiting for an engine reply (a request waiting for its
// commit), in a Pebble commit's wait, and in fdatasync.
type window struct {
	start, length, bin time.Duration
	rows               [][5]float64
	state              map[trace.GoID]int // column the goroutine is counted in, -1: none
	counts             [5]int
	lastT              trace.Time
}

func parseWindow(s string) (*window, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("want start_ms,len_ms,bin_us, got %q", s)
	}
	var v [3]float64
	for i, p := range parts {
		n, err := strconv.ParseFloat(p, 64)
		if err != nil || n < 0 || (i > 0 && n == 0) {
			return nil, fmt.Errorf("bad number %q", p)
		}
		v[i] = n
	}
	w := &window{start: time.Duration(v[0] * 1e6), length: time.Duration(v[1] * 1e6), bin: time.Duration(v[2] * 1e3), state: map[trace.GoID]int{}}
	w.rows = make([][5]float64, int(w.length/w.bin))
	return w, nil
}

// add books the time since the last transition, then moves goroutine id
// to the column of its new state; fsync says the state is a syscall in
// fsyncFunc.
func (w *window) add(ev trace.Event, first trace.Time, id trace.GoID, to trace.GoState, fsync bool) {
	now := time.Duration(ev.Time() - first)
	if w.lastT != 0 {
		w.book(time.Duration(w.lastT-first), now)
	}
	w.lastT = ev.Time()
	col := -1
	switch to {
	case trace.GoRunning:
		col = 0
	case trace.GoRunnable:
		col = 1
	case trace.GoWaiting:
		if inStack(ev.Stack(), "Engine).Submit") {
			col = 2
		} else if inStack(ev.Stack(), "commitPipeline).publish") {
			col = 3
		}
	case trace.GoSyscall:
		if fsync {
			col = 4
		}
	}
	if old, ok := w.state[id]; ok && old >= 0 {
		w.counts[old]--
	}
	w.state[id] = col
	if col >= 0 {
		w.counts[col]++
	}
}

// book spreads the current counts over the bins between from and to.
func (w *window) book(from, to time.Duration) {
	for t := max(from, w.start); t < to && t < w.start+w.length; {
		i := int((t - w.start) / w.bin)
		end := min(to, w.start+time.Duration(i+1)*w.bin)
		if i >= len(w.rows) {
			return
		}
		frac := float64(end-t) / float64(w.bin)
		for c, n := range w.counts {
			w.rows[i][c] += frac * float64(max(n, 0))
		}
		t = end
	}
}

// String prints the timeline, one bin per line.
func (w *window) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%8s %8s %8s %8s %8s %8s\n", "t(µs)", "running", "runnable", "waiting", "inCommit", "fsync")
	for i, r := range w.rows {
		fmt.Fprintf(&b, "%8d %8.2f %8.1f %8.1f %8.2f %8.2f\n", (w.start + time.Duration(i)*w.bin).Microseconds(), r[0], r[1], r[2], r[3], r[4])
	}
	return b.String()
}

// isFlagSet reports whether the command line set the flag, so that an
// empty -blocked= (every stack) differs from no -blocked at all.
func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// BlockedStack is the waiting done in one blocking stack.
type BlockedStack struct {
	Stack      string // innermost frame first, package paths trimmed
	N          int    // times a goroutine blocked there
	Total, Max time.Duration
}

func (b BlockedStack) String() string {
	return fmt.Sprintf("%10v n=%-6d max=%-10v %s", b.Total.Round(time.Microsecond), b.N, b.Max.Round(time.Microsecond), b.Stack)
}

// blockedFrames is how deep a blocking stack is told apart: deep enough to
// reach from a lock or a channel to eventd's caller through Pebble's
// commit pipeline.
const blockedFrames = 14

// Blocked sums, by the stack a goroutine blocked in, how long it waited
// (from blocking until it was made runnable again), for stacks containing
// match, longest total first. It is what a CPU profile cannot show: time
// spent waiting for a lock, a channel or a commit (session 41 found the
// shards' commits waiting for the derived checkpoint this way).
func Blocked(r io.Reader, match string) ([]BlockedStack, error) {
	type open struct {
		at    trace.Time
		stack string
	}
	waiting := map[trace.GoID]open{}
	by := map[string]*BlockedStack{}
	err := eachEvent(r, func(ev trace.Event) {
		if ev.Kind() != trace.EventStateTransition || ev.StateTransition().Resource.Kind != trace.ResourceGoroutine {
			return
		}
		st := ev.StateTransition()
		id := st.Resource.Goroutine()
		from, to := st.Goroutine()
		switch {
		case from == trace.GoRunning && to == trace.GoWaiting:
			if k := stackKey(ev.Stack()); strings.Contains(k, match) {
				waiting[id] = open{ev.Time(), k}
			}
		case from == trace.GoWaiting && to == trace.GoRunnable:
			o, ok := waiting[id]
			if !ok {
				return
			}
			delete(waiting, id)
			b := by[o.stack]
			if b == nil {
				b = &BlockedStack{Stack: o.stack}
				by[o.stack] = b
			}
			d := time.Duration(ev.Time() - o.at)
			b.N++
			b.Total += d
			b.Max = max(b.Max, d)
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]BlockedStack, 0, len(by))
	for _, b := range by {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b BlockedStack) int { return cmp.Compare(b.Total, a.Total) })
	return out, nil
}

// stackKey is a stack's innermost blockedFrames functions, package paths
// trimmed, joined by " < ".
func stackKey(st trace.Stack) string {
	var fr []string
	for f := range st.Frames() {
		fn := f.Func
		if i := strings.LastIndex(fn, "/"); i >= 0 {
			fn = fn[i+1:]
		}
		if fr = append(fr, fn); len(fr) == blockedFrames {
			break
		}
	}
	return strings.Join(fr, " < ")
}
