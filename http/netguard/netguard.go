// Package netguard wraps a net.Listener so that a server survives running out
// of file descriptors and holds at most a set number of connections, in total
// and per client IP.
//
// fasthttp's Server.Serve returns on any accept error that is not a timeout,
// EMFILE included, so a flood of slow connections used to stop eventd. The
// Listener here retries temporary accept errors with backoff instead (as
// net/http does) and never hands them to the server. Connections over a cap
// are closed at once, before any byte is read or written, and counted; the
// caps are enforced here rather than with fasthttp's Concurrency (which
// answers 503 on an accepted connection) or MaxConnsPerIP (which writes a 429,
// ignores IPv6 and counts nothing).
package netguard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eventd/eventd/engine/metrics"
)

// Backoff bounds for temporary accept errors, the same as net/http's.
const (
	MinBackoff = 5 * time.Millisecond
	MaxBackoff = time.Second
)

// logEvery limits how often the same warning is logged.
const logEvery = time.Minute

// Config configures a Listener.
type Config struct {
	// Name labels the listener in metrics and logs ("public", "admin").
	Name string
	// MaxConns caps the connections open at once; 0 means no cap.
	MaxConns int
	// MaxConnsPerIP caps the connections open at once from one client IP; 0 means no cap.
	MaxConnsPerIP int
	// Logger receives the warnings; nil discards them.
	Logger *slog.Logger
	// Metrics receives the counters and the gauge; nil keeps them unregistered.
	Metrics *metrics.Registry
}

// Listener is a net.Listener with accept-error backoff and connection caps.
type Listener struct {
	inner         net.Listener
	name          string
	maxConns      int
	maxConnsPerIP int
	log           *slog.Logger

	mu      sync.Mutex
	open    int
	perIP   map[netip.Addr]int
	lastLog [3]time.Time // by logKind

	done      chan struct{}
	closeOnce sync.Once

	openGauge   *metrics.Gauge
	rejected    [2]*metrics.Counter // by reason
	acceptError *metrics.Counter

	// wait sleeps d and reports false if the listener was closed meanwhile;
	// tests replace it to record the backoff without sleeping.
	wait func(d time.Duration) bool
	// now is time.Now, replaceable in tests.
	now func() time.Time
}

// Rejection reasons, also the values of the metric's reason label.
const (
	reasonMaxConns = iota
	reasonMaxConnsPerIP
)

var reasonNames = [2]string{"max_conns", "max_conns_per_ip"}

const logAccept = 2 // lastLog index of the accept-error warning

// Wrap returns ln guarded by cfg. Closing the Listener closes ln.
func Wrap(ln net.Listener, cfg Config) *Listener {
	l := &Listener{
		inner:         ln,
		name:          cfg.Name,
		maxConns:      cfg.MaxConns,
		maxConnsPerIP: cfg.MaxConnsPerIP,
		log:           cfg.Logger,
		perIP:         make(map[netip.Addr]int),
		done:          make(chan struct{}),
		now:           time.Now,
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = metrics.New()
	}
	label := fmt.Sprintf("listener=%q", cfg.Name)
	l.openGauge = reg.Gauge("eventd_http_open_connections", "Connections open per listener.", label)
	for i, r := range reasonNames {
		l.rejected[i] = reg.Counter("eventd_http_connections_rejected_total",
			"Connections closed at once because a connection cap was reached.", fmt.Sprintf("%s,reason=%q", label, r))
	}
	l.acceptError = reg.Counter("eventd_http_accept_errors_total",
		"Temporary accept errors (such as running out of file descriptors), retried with backoff.", label)
	l.wait = l.sleep
	return l
}

// Accept returns the next connection under the caps. Temporary errors are
// retried with backoff from MinBackoff doubling to MaxBackoff, logged once per
// episode (and at most once a minute); connections over a cap are closed and
// counted. It returns an error only when the underlying listener fails for
// good or is closed.
func (l *Listener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if l.closed() {
				// fasthttp and net/http read this as a shutdown, not a failure.
				return nil, net.ErrClosed
			}
			if !Temporary(err) {
				return nil, err
			}
			l.acceptError.Inc()
			if delay == 0 {
				delay = MinBackoff
				if l.mayLog(logAccept) {
					l.log.Warn("accept failed, retrying with backoff", "listener", l.name, "err", err,
						"max_backoff", MaxBackoff.String())
				}
			} else if delay *= 2; delay > MaxBackoff {
				delay = MaxBackoff
			}
			if !l.wait(delay) {
				return nil, net.ErrClosed
			}
			continue
		}
		delay = 0
		if gc := l.admit(c); gc != nil {
			return gc, nil
		}
	}
}

// admit counts c in, or closes it when a cap is reached (returning nil).
func (l *Listener) admit(c net.Conn) net.Conn {
	ip := remoteIP(c)
	reason := -1
	l.mu.Lock()
	switch {
	case l.maxConns > 0 && l.open >= l.maxConns:
		reason = reasonMaxConns
	case l.maxConnsPerIP > 0 && ip.IsValid() && l.perIP[ip] >= l.maxConnsPerIP:
		reason = reasonMaxConnsPerIP
	default:
		l.open++
		if ip.IsValid() {
			l.perIP[ip]++
		}
	}
	logIt := reason >= 0 && l.mayLogLocked(reason)
	l.mu.Unlock()
	if reason >= 0 {
		// Counted before the close, so a client that saw the close finds it in /metrics.
		l.rejected[reason].Inc()
		_ = c.Close()
		if logIt {
			l.log.Warn("connection cap reached, closing new connections", "listener", l.name,
				"reason", reasonNames[reason], "max_conns", l.maxConns, "max_conns_per_ip", l.maxConnsPerIP,
				"remote_ip", ip.String())
		}
		return nil
	}
	l.openGauge.Add(1)
	return &conn{Conn: c, l: l, ip: ip}
}

// release forgets a closed connection.
func (l *Listener) release(ip netip.Addr) {
	l.mu.Lock()
	l.open--
	if ip.IsValid() {
		if n := l.perIP[ip] - 1; n > 0 {
			l.perIP[ip] = n
		} else {
			delete(l.perIP, ip)
		}
	}
	l.mu.Unlock()
	l.openGauge.Add(-1)
}

// Open reports the connections currently open through l.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Close closes the underlying listener and ends a backoff wait.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.inner.Close()
}

// Addr is the underlying listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

func (l *Listener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (l *Listener) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

func (l *Listener) mayLog(kind int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mayLogLocked(kind)
}

// mayLogLocked rate-limits a warning to one per logEvery; l.mu is held.
func (l *Listener) mayLogLocked(kind int) bool {
	now := l.now()
	if !l.lastLog[kind].IsZero() && now.Sub(l.lastLog[kind]) < logEvery {
		return false
	}
	l.lastLog[kind] = now
	return true
}

// conn is an admitted connection; its first Close releases its place.
type conn struct {
	net.Conn
	l      *Listener
	ip     netip.Addr
	closed atomic.Bool
}

// Close closes the connection and, the first time only, frees its place
// under the caps (after the descriptor is gone).
func (c *conn) Close() error {
	first := c.closed.CompareAndSwap(false, true)
	err := c.Conn.Close()
	if first {
		c.l.release(c.ip)
	}
	return err
}

// remoteIP is the client address of c (IPv4-mapped IPv6 unmapped), or the
// zero Addr when it is not an IP address.
func remoteIP(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case nil:
		return netip.Addr{}
	default:
		ap, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return netip.Addr{}
		}
		return ap.Addr().Unmap()
	}
}

// Temporary reports whether an accept error is worth retrying: the process
// or system is out of descriptors or buffers, or one pending connection
// failed before it was accepted. A closed listener is not temporary.
func Temporary(err error) bool {
	if err == nil || errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range [...]syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED,
		syscall.ECONNRESET, syscall.ENOBUFS, syscall.ENOMEM, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return true
	}
	var tmp interface{ Temporary() bool }
	return errors.As(err, &tmp) && tmp.Temporary()
}
