package bench

import (
	"bytes"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// NoopServer is the HTTP ceiling: a fasthttp server that reads each request
// and answers 201 with a small JSON body, doing nothing else. eventd cannot
// beat it on the same machine, so eventd / noop says how much of the HTTP
// stack's capacity the service keeps.
type NoopServer struct {
	// URL is the base URL to point a Generator at.
	URL  string
	ln   net.Listener
	srv  *fasthttp.Server
	done chan error
}

var (
	noopEvent   = []byte(`{"id":"evt_01JH0000000000000000000000","event":"purchase","status":"accepted","timestamp":"2026-01-15T10:30:00.000Z"}`)
	noopHealth  = []byte(`{"status":"ok"}`)
	noopList    = []byte(`{"data":[],"total":0,"limit":20,"offset":0,"has_more":false}`)
	noopBatchA  = []byte(`{"accepted":`)
	noopBatchB  = []byte(`,"rejected":0,"results":[]}`)
	eventMarker = []byte(`"event":`)
)

// NoopHandler answers like eventd's ingest routes without doing their work.
// A batch is answered with an accepted count (one cheap scan of the body) so
// the generator's event accounting works against it unchanged; any other GET
// gets 200 with a small body, as eventd's reads would.
func NoopHandler(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	switch path := string(ctx.Path()); {
	case path == "/healthz":
		ctx.SetBody(noopHealth)
	case ctx.IsGet() && path == "/events":
		ctx.SetBody(noopList)
	case ctx.IsGet():
		ctx.SetBody(noopEvent)
	case path == "/events/batch":
		ctx.SetStatusCode(fasthttp.StatusCreated)
		var num [20]byte
		n := bytes.Count(ctx.PostBody(), eventMarker)
		ctx.Response.AppendBody(noopBatchA)
		ctx.Response.AppendBody(strconv.AppendInt(num[:0], int64(n), 10))
		ctx.Response.AppendBody(noopBatchB)
	default:
		ctx.SetStatusCode(fasthttp.StatusCreated)
		ctx.SetBody(noopEvent)
	}
}

// NewNoopFastServer configures the server as a production service would be
// (body limit of a batch, idle timeout), so the ceiling is realistic.
func NewNoopFastServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               NoopHandler,
		Name:                  "noop",
		MaxRequestBodySize:    5 << 20,
		IdleTimeout:           2 * time.Minute,
		NoDefaultContentType:  true,
		NoDefaultServerHeader: true,
	}
}

// StartNoop serves the no-op handler on addr ("127.0.0.1:0" picks a port) in
// this process.
func StartNoop(addr string) (*NoopServer, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &NoopServer{
		URL:  "http://" + ln.Addr().String(),
		ln:   ln,
		srv:  NewNoopFastServer(),
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and waits for it. Closing the listener as well
// covers a Serve goroutine that had not started yet, which Shutdown misses.
func (s *NoopServer) Close() error {
	err := s.srv.Shutdown()
	_ = s.ln.Close()
	<-s.done
	return err
}
