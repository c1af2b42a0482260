package http

import (
	"net"
	"sync"

	"github.com/valyala/fasthttp"
)

// pendingUpgrades holds what a stream's connection must release when it
// closes, as fasthttp's ConnState reports it. A WebSocket upgrade whose
// 101 is not written yet: fasthttp runs the upgrade's handler only once
// the 101 was written, so when the write fails (the client reset the
// connection) the handler never runs, and the stream's slot in its key's
// limit, its place among the tracked streams and its wait-group entry
// would stay taken until the process ends. An SSE response: its last
// bytes leave fasthttp's pipe only before the close.
type pendingUpgrades struct {
	mu sync.Mutex
	m  map[net.Conn]func()
}

// add remembers release for c until claim or closed takes it.
func (p *pendingUpgrades) add(c net.Conn, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[net.Conn]func())
	}
	p.m[c] = release
}

// claim is the upgrade's handler taking c over: the stream runs and
// releases itself. It reports false if c is not pending.
func (p *pendingUpgrades) claim(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.m[c]
	delete(p.m, c)
	return ok
}

// closed runs the release of an upgrade whose handler never ran.
func (p *pendingUpgrades) closed(c net.Conn) {
	p.mu.Lock()
	release, ok := p.m[c]
	delete(p.m, c)
	p.mu.Unlock()
	if ok {
		release()
	}
}

// connState is both listeners' fasthttp ConnState hook.
func (s *Server) connState(c net.Conn, state fasthttp.ConnState) {
	if state == fasthttp.StateClosed {
		s.streams.pending.closed(c)
	}
}
