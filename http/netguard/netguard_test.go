package netguard

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/logtest"
)

// fakeConn is a connection from addr that records its closes.
type fakeConn struct {
	net.Conn // nil: only the methods below are used
	addr     net.Addr
	closes   atomic.Int32
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.addr }
func (c *fakeConn) Close() error         { c.closes.Add(1); return nil }

func tcpConn(ip string) *fakeConn {
	return &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
}

// result is what one Accept call of the fake listener returns.
type result struct {
	c   net.Conn
	err error
}

// fakeListener hands out queued results, then blocks until closed.
type fakeListener struct {
	results chan result
	done    chan struct{}
	once    sync.Once
}

func newFake(rs ...result) *fakeListener {
	f := &fakeListener{results: make(chan result, len(rs)), done: make(chan struct{})}
	for _, r := range rs {
		f.results <- r
	}
	return f
}

func (f *fakeListener) Accept() (net.Conn, error) {
	select {
	case r := <-f.results:
		return r.c, r.err
	case <-f.done:
		return nil, net.ErrClosed
	}
}

func (f *fakeListener) Close() error   { f.once.Do(func() { close(f.done) }); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

func emfile() error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
}

func metricsText(t *testing.T, reg *metrics.Registry) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := reg.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func wantMetric(t *testing.T, reg *metrics.Registry, line string) {
	t.Helper()
	if text := metricsText(t, reg); !strings.Contains(text, line+"\n") {
		t.Fatalf("metrics lack %q:\n%s", line, text)
	}
}

func TestTemporary(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"EMFILE", emfile(), true},
		{"ENFILE", &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, true},
		{"ECONNABORTED", &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{"ENOBUFS", syscall.ENOBUFS, true},
		{"timeout", os.ErrDeadlineExceeded, true},
		{"closed", &net.OpError{Op: "accept", Err: net.ErrClosed}, false},
		{"EBADF", &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EBADF)}, false},
		{"other", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Temporary(tc.err); got != tc.want {
				t.Fatalf("Temporary(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestBackoff: temporary errors are retried with 5 ms doubling to 1 s, never
// returned, counted, and logged once per episode; a success resets the delay.
func TestBackoff(t *testing.T) {
	var rs []result
	for range 10 {
		rs = append(rs, result{err: emfile()})
	}
	c1 := tcpConn("10.0.0.1")
	rs = append(rs, result{c: c1}, result{err: emfile()}, result{err: emfile()}, result{c: tcpConn("10.0.0.1")})
	reg := metrics.New()
	logs := &logtest.Buffer{}
	l := Wrap(newFake(rs...), Config{Name: "public", Metrics: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	var waits []time.Duration
	l.wait = func(d time.Duration) bool { waits = append(waits, d); return true }

	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	if c.(*conn).Conn != c1 {
		t.Fatalf("Accept returned %v, want the first good connection", c)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("backoff %v, want %v", waits, want)
	}
	if n := strings.Count(logs.String(), "accept failed"); n != 1 {
		t.Fatalf("logged %d times in one episode, want 1:\n%s", n, logs)
	}

	// A new episode starts from 5 ms again; its log is rate-limited.
	waits = nil
	if _, err := l.Accept(); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	if fmt.Sprint(waits) != fmt.Sprint([]time.Duration{5 * time.Millisecond, 10 * time.Millisecond}) {
		t.Fatalf("second episode backoff %v", waits)
	}
	if n := strings.Count(logs.String(), "accept failed"); n != 1 {
		t.Fatalf("second episode within a minute logged again (%d lines)", n)
	}
	wantMetric(t, reg, `eventd_http_accept_errors_total{listener="public"} 12`)
}

// TestPermanentError: an error that is not temporary ends Accept at once.
func TestPermanentError(t *testing.T) {
	boom := errors.New("boom")
	l := Wrap(newFake(result{err: boom}), Config{Name: "public"})
	l.wait = func(time.Duration) bool { t.Fatal("waited on a permanent error"); return false }
	if _, err := l.Accept(); err != boom {
		t.Fatalf("Accept error %v, want %v", err, boom)
	}
}

// TestCloseEndsBackoff: closing the listener during a backoff wait makes
// Accept return a closed-listener error (which fasthttp treats as shutdown).
func TestCloseEndsBackoff(t *testing.T) {
	rs := make([]result, 100)
	for i := range rs {
		rs[i].err = emfile()
	}
	f := newFake(rs...)
	l := Wrap(f, Config{Name: "public"})
	got := make(chan error, 1)
	go func() { _, err := l.Accept(); got <- err }()
	// The real wait is used: MaxBackoff is reached after a few retries and Close ends it.
	_ = l.Close()
	select {
	case err := <-got:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}

// TestCaps walks a table of accepts and closes through the total and per-IP caps.
func TestCaps(t *testing.T) {
	type step struct {
		ip     string // accept from ip
		close  int    // or: close the n-th accepted connection (1-based)
		admit  bool   // for an accept: admitted or closed at once
		open   int    // open connections afterwards
		reason string // rejection reason expected
	}
	for _, tc := range []struct {
		name           string
		maxConns, perI int
		steps          []step
	}{
		{"total cap", 2, 0, []step{
			{ip: "10.0.0.1", admit: true, open: 1},
			{ip: "10.0.0.2", admit: true, open: 2},
			{ip: "10.0.0.3", open: 2, reason: "max_conns"},
			{close: 1, open: 1},
			{ip: "10.0.0.3", admit: true, open: 2},
		}},
		{"per-ip cap", 0, 2, []step{
			{ip: "10.0.0.1", admit: true, open: 1},
			{ip: "::ffff:10.0.0.1", admit: true, open: 2}, // same client, IPv4-mapped
			{ip: "10.0.0.1", open: 2, reason: "max_conns_per_ip"},
			{ip: "10.0.0.2", admit: true, open: 3},
			{ip: "2001:db8::1", admit: true, open: 4},
			{ip: "2001:db8::1", admit: true, open: 5},
			{ip: "2001:db8::1", open: 5, reason: "max_conns_per_ip"},
			{close: 2, open: 4},
			{ip: "10.0.0.1", admit: true, open: 5},
		}},
		{"total before per-ip", 1, 1, []step{
			{ip: "10.0.0.1", admit: true, open: 1},
			{ip: "10.0.0.1", open: 1, reason: "max_conns"},
		}},
		{"no caps", 0, 0, []step{
			{ip: "10.0.0.1", admit: true, open: 1},
			{ip: "10.0.0.1", admit: true, open: 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := metrics.New()
			l := Wrap(newFake(), Config{Name: "public", MaxConns: tc.maxConns, MaxConnsPerIP: tc.perI, Metrics: reg})
			var accepted []net.Conn
			rejected := map[string]int{}
			for i, s := range tc.steps {
				if s.close > 0 {
					if err := accepted[s.close-1].Close(); err != nil {
						t.Fatal(err)
					}
				} else {
					raw := tcpConn(s.ip)
					got := l.admit(raw)
					if (got != nil) != s.admit {
						t.Fatalf("step %d: admitted=%v, want %v", i, got != nil, s.admit)
					}
					if got != nil {
						accepted = append(accepted, got)
						if raw.closes.Load() != 0 {
							t.Fatalf("step %d: admitted connection was closed", i)
						}
					} else {
						rejected[s.reason]++
						if raw.closes.Load() != 1 {
							t.Fatalf("step %d: rejected connection closed %d times, want 1", i, raw.closes.Load())
						}
					}
				}
				if l.Open() != s.open {
					t.Fatalf("step %d: open %d, want %d", i, l.Open(), s.open)
				}
				wantMetric(t, reg, fmt.Sprintf(`eventd_http_open_connections{listener="public"} %d`, s.open))
			}
			for _, r := range reasonNames {
				wantMetric(t, reg, fmt.Sprintf(`eventd_http_connections_rejected_total{listener="public",reason=%q} %d`, r, rejected[r]))
			}
		})
	}
}

// TestCloseOnce: closing an admitted connection twice (or from two
// goroutines) frees its place exactly once.
func TestCloseOnce(t *testing.T) {
	l := Wrap(newFake(), Config{Name: "public", MaxConns: 10, MaxConnsPerIP: 10})
	a := l.admit(tcpConn("10.0.0.1"))
	b := l.admit(tcpConn("10.0.0.1"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = a.Close() })
	}
	wg.Wait()
	if l.Open() != 1 {
		t.Fatalf("open %d after closing one of two connections many times, want 1", l.Open())
	}
	l.mu.Lock()
	n := l.perIP[netip.MustParseAddr("10.0.0.1")]
	l.mu.Unlock()
	if n != 1 {
		t.Fatalf("per-ip count %d, want 1", n)
	}
	_ = b.Close()
	l.mu.Lock()
	left := len(l.perIP)
	l.mu.Unlock()
	if l.Open() != 0 || left != 0 {
		t.Fatalf("open %d, per-ip entries %d after closing all, want 0 and 0", l.Open(), left)
	}
}

// TestAcceptRejectsThenAdmits: Accept skips a connection over the cap and
// returns the next one that fits, without handing the rejected one out.
func TestAcceptRejectsThenAdmits(t *testing.T) {
	first, over, third := tcpConn("10.0.0.1"), tcpConn("10.0.0.1"), tcpConn("10.0.0.2")
	l := Wrap(newFake(result{c: first}, result{c: over}, result{c: third}), Config{Name: "public", MaxConnsPerIP: 1})
	for _, want := range []*fakeConn{first, third} {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if c.(*conn).Conn != want {
			t.Fatalf("Accept returned %v, want %v", c.RemoteAddr(), want.addr)
		}
	}
	if over.closes.Load() != 1 {
		t.Fatalf("connection over the per-ip cap closed %d times, want 1", over.closes.Load())
	}
}

// TestRealListener: the wrapper works on a loopback TCP listener, including
// under tls.NewListener's expectations (Close ends a blocked Accept).
func TestRealListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(inner, Config{Name: "public", MaxConns: 1})
	defer l.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srvA := <-accepted
	// The second connection is over the cap: the server closes it without a byte.
	b, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_ = b.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := b.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("over-cap connection read %d, %v; want closed by the server", n, err)
	}
	// Freeing the place lets the next one in.
	_ = srvA.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case srvC := <-accepted:
		_ = srvC.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("connection after a close was not admitted")
	}
	_ = l.Close()
	for range accepted {
	}
}
