package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// ExitFatal is the exit status of eventd after a fatal storage error.
const ExitFatal = 3

// FatalError is a Pebble failure after which the store cannot write again,
// such as a WAL write that failed with ENOSPC: Pebble's commit pipeline is
// left broken ("fatal commit error"), so eventd must restart. Every write
// after it returns the same error without touching Pebble.
type FatalError struct {
	Msg   string
	cause error // the error among Pebble's arguments, if any
}

func (e *FatalError) Error() string { return "storage failed: " + e.Msg }

// Unwrap gives the cause, so errors.Is(err, syscall.ENOSPC) works.
func (e *FatalError) Unwrap() error { return e.cause }

// NoSpace reports whether err is (or wraps) a full disk.
func NoSpace(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device"))
}

// commitFatal is the format of the Fatalf that db.go of Pebble calls in the
// committing goroutine when the WAL write or sync failed. That goroutine is
// always ours (it called Commit, Set, LogData...), so this one Fatalf may
// unwind with a panic that our write methods turn into an error; every other
// Fatalf may come from Pebble's own flush or compaction goroutines, where a
// panic would kill the process with a trace.
const commitFatal = "pebble: fatal commit error"

// fatalState is shared by a DB and its Pebble logger.
type fatalState struct {
	err     atomic.Pointer[FatalError]
	log     *slog.Logger
	onFatal func(error)
	once    sync.Once
}

// failed is the fatal error, or nil while the store is healthy.
func (s *fatalState) failed() error {
	if fe := s.err.Load(); fe != nil {
		return fe
	}
	return nil
}

// fail records the first fatal error, logs it once and starts the exit.
func (s *fatalState) fail(fe *FatalError) *FatalError {
	if !s.err.CompareAndSwap(nil, fe) {
		return s.err.Load()
	}
	s.once.Do(func() {
		if s.log != nil {
			s.log.Error("storage failed; eventd stops: writes are refused and the process exits with status 3",
				"component", "pebble", "err", fe.Msg, "no_space", NoSpace(fe), "exit_code", ExitFatal)
		}
		on := s.onFatal
		if on == nil {
			on = func(error) { os.Exit(ExitFatal) }
		}
		go on(fe)
	})
	return fe
}

// recoverFatal, deferred by every method that writes to Pebble, turns the
// fatal panic into the method's error. Once the store failed, any panic is
// a consequence and becomes the fatal error too. Pebble also panics with
// the error itself when a commit finds its WAL writer broken (db.go:
// commitWrite), which can happen in a second committer before the first
// one reached Fatalf: such an error is a fatal failure of its own. Other
// panics (programming errors) go on.
func (s *fatalState) recoverFatal(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if fe := s.err.Load(); fe != nil {
		*err = fe
		return
	}
	if e, ok := r.(error); ok {
		*err = s.fail(&FatalError{Msg: e.Error(), cause: e})
		return
	}
	panic(r)
}

// ErrReadOnly refuses writes to a store opened with Options.ReadOnly.
var ErrReadOnly = errors.New("storage: the store is open read-only")

// apply runs a write to Pebble with the fatal checks around it.
func (d *DB) apply(fn func() error) (err error) {
	if d.readOnly {
		return ErrReadOnly
	}
	if err := d.fatal.failed(); err != nil {
		return err
	}
	defer d.fatal.recoverFatal(&err)
	return fn()
}

// commit commits a Pebble batch with the fatal checks around it.
func (d *DB) commit(b *pebble.Batch, o *pebble.WriteOptions) error {
	return d.apply(func() error { return b.Commit(o) })
}

// Failed is the fatal error that stopped the store, or nil.
func (d *DB) Failed() error { return d.fatal.failed() }

// pebbleLogger routes Pebble's log lines to slog.
type pebbleLogger struct {
	l     *slog.Logger
	fatal *fatalState
}

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l != nil {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.l != nil {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf never returns: Pebble calls it when it cannot go on, and a return
// would let it report a failed commit as done. It records the failure (one
// log line, then the exit through Options.OnFatal) and either unwinds the
// committing goroutine (see commitFatal) or parks Pebble's own goroutine
// until the process exits.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	fe := &FatalError{Msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if e, ok := a.(error); ok {
			fe.cause = e
			break
		}
	}
	p.fatal.fail(fe)
	if strings.HasPrefix(format, commitFatal) {
		panic(fe)
	}
	select {}
}

// backgroundErrors logs Pebble's background errors and slows down its
// retries on a full disk: Pebble retries a failed flush or compaction at
// once, with no backoff (a TODO in its compaction.go), which on a full disk
// spun a core and logged thousands of lines a second. On ENOSPC the hook
// sleeps (it runs on the failing flush or compaction goroutine) and logs at
// most once every 10 s with the count of errors in between.
type backgroundErrors struct {
	log   *slog.Logger
	mu    sync.Mutex
	last  time.Time
	quiet int
	sleep time.Duration
}

func (b *backgroundErrors) handle(err error) {
	if !NoSpace(err) {
		if b.log != nil {
			b.log.Error("background error: "+err.Error(), "component", "pebble")
		}
		return
	}
	b.mu.Lock()
	now := time.Now()
	if now.Sub(b.last) >= 10*time.Second {
		if b.log != nil {
			b.log.Error("background error: disk full; retrying every second", "component", "pebble",
				"err", err.Error(), "repeats_since_last_line", b.quiet)
		}
		b.last, b.quiet = now, 0
	} else {
		b.quiet++
	}
	b.mu.Unlock()
	time.Sleep(b.sleep)
}
