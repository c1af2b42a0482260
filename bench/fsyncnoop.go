package bench

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// FsyncNoopServer is the durability floor: the no-op server, except that a
// POST is answered only once its body is on disk. A single writer goroutine
// takes every body queued meanwhile, writes them with one write(2) and one
// fdatasync (group commit, as Pebble's WAL does), then lets their handlers
// answer. No parsing, no index, no storage engine: whatever a server that
// syncs before its 201 does, it does at least this, so this server's rate
// and CPU are what such a server can reach on the machine, and eventd's
// ratio to the no-op cannot pass this one's.
type FsyncNoopServer struct {
	// URL is the base URL to point a Generator at.
	URL string
	ln  net.Listener
	srv *fasthttp.Server
	w   *syncWriter
	dir string
	// done receives Serve's error.
	done chan error
}

// FsyncNoopOptions configures StartFsyncNoop.
type FsyncNoopOptions struct {
	// Addr is where to listen; empty picks a loopback port.
	Addr string
	// Dir holds the log file; it should be on the disk eventd writes to.
	// Empty means a temporary directory. Either way the server removes
	// what it created on Close.
	Dir string
	// FsyncDelay is added after every sync, as eventd's and the Pebble
	// ceiling's --fsync-delay do.
	FsyncDelay time.Duration
}

// fsyncNoopLogSize is the log file's size. It is written in full once at
// start and then overwritten from the beginning whenever the writer reaches
// its end, so every sync covers data only, never a size or extent change:
// the cheapest sync the file system offers (Pebble's recycled WAL files are
// the same), so that the floor is a floor.
const fsyncNoopLogSize = 64 << 20

// StartFsyncNoop writes the log file and starts serving.
func StartFsyncNoop(o FsyncNoopOptions) (*FsyncNoopServer, error) {
	dir, err := os.MkdirTemp(o.Dir, "eventd-bench-fsyncnoop-")
	if err != nil {
		return nil, err
	}
	w, err := openSyncWriter(filepath.Join(dir, "log"), fsyncNoopLogSize, o.FsyncDelay)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		w.close()
		os.RemoveAll(dir)
		return nil, err
	}
	srv := NewNoopFastServer()
	srv.Name = "fsync-noop"
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		if ctx.IsPost() {
			if err := w.write(ctx.PostBody()); err != nil {
				ctx.Error(`{"error":"`+err.Error()+`"}`, fasthttp.StatusInternalServerError)
				return
			}
		}
		NoopHandler(ctx)
	}
	s := &FsyncNoopServer{URL: "http://" + ln.Addr().String(), ln: ln, srv: srv, w: w, dir: dir, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(ln) }()
	return s, nil
}

// Close stops the server, its writer, and removes its log.
func (s *FsyncNoopServer) Close() error {
	err := s.srv.Shutdown()
	_ = s.ln.Close()
	<-s.done
	s.w.close()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// syncWriter writes bodies one after the other into a file of fixed size,
// from its start again when they reach its end, and fdatasyncs them in
// groups.
type syncWriter struct {
	f     *os.File
	size  int64
	delay time.Duration

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a body is queued or closed is set
	queue   []*syncWait
	closed  bool
	stopped chan struct{}
	// buf and off belong to the writer goroutine.
	buf []byte
	off int64
	// pool keeps the waits, so that a request allocates nothing here.
	pool sync.Pool
}

// syncWait is one body waiting for its sync.
type syncWait struct {
	body []byte
	done chan error
}

// errWriterClosed answers a body that comes after close.
var errWriterClosed = errors.New("fsync-noop: closed")

// openSyncWriter creates the file at its full size, synced, and starts the
// writer goroutine.
func openSyncWriter(path string, size int64, delay time.Duration) (*syncWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	zero := make([]byte, min(size, 1<<20))
	for n := int64(0); n < size; n += int64(len(zero)) {
		if _, err := f.Write(zero[:min(int64(len(zero)), size-n)]); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	w := &syncWriter{f: f, size: size, delay: delay, stopped: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	w.pool.New = func() any { return &syncWait{done: make(chan error, 1)} }
	go w.loop()
	return w, nil
}

// write returns once body is synced.
func (w *syncWriter) write(body []byte) error {
	sw := w.pool.Get().(*syncWait)
	sw.body = append(sw.body[:0], body...)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.pool.Put(sw)
		return errWriterClosed
	}
	w.queue = append(w.queue, sw)
	w.cond.Signal()
	w.mu.Unlock()
	err := <-sw.done
	w.pool.Put(sw)
	return err
}

// loop takes everything queued, writes it at the current offset (back to
// the start when it would pass the end), syncs and answers, until closed.
func (w *syncWriter) loop() {
	defer close(w.stopped)
	var group []*syncWait
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		group, w.queue = w.queue, group[:0]
		w.mu.Unlock()

		w.buf = w.buf[:0]
		for _, sw := range group {
			w.buf = append(w.buf, sw.body...)
		}
		err := w.flush()
		for _, sw := range group {
			sw.done <- err
		}
	}
}

// flush writes buf and syncs it.
func (w *syncWriter) flush() error {
	b := w.buf
	if int64(len(b)) > w.size {
		b = b[:w.size] // a burst larger than the file: what the floor measures is the sync
	}
	if w.off+int64(len(b)) > w.size {
		w.off = 0
	}
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.off += int64(len(b))
	if err := fdatasync(w.f); err != nil {
		return err
	}
	if w.delay > 0 {
		time.Sleep(w.delay)
	}
	return nil
}

// close lets the writer finish what is queued (a write after it gets
// errWriterClosed), then closes the file.
func (w *syncWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.cond.Signal()
	w.mu.Unlock()
	<-w.stopped
	w.f.Close()
}
