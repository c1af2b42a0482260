package http

import (
	"net"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/eventd/eventd/bench"
	"github.com/eventd/eventd/engine"
)

// writeCounter is a listener whose connections count their writes.
type writeCounter struct {
	*fasthttputil.InmemoryListener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.InmemoryListener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{c, &l.writes}, nil
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestBatchAnswerOneWrite: the answer to a batch of 100 events, longer
// than fasthttp's default 4 KiB write buffer, goes out in one write(2)
// (writeBufferSize), not two.
func TestBatchAnswerOneWrite(t *testing.T) {
	eng, key := unlimitedKey(t, engine.Secret)
	ln := &writeCounter{InmemoryListener: fasthttputil.NewInmemoryListener()}
	c := servePublic(t, New(Config{Engine: eng, AdminToken: "t"}), ln.InmemoryListener, ln)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	bench.BatchRequest("/events/batch", key, bench.NewTemplate(bench.EventTemplate), 100)(0, req)
	req.SetHost("eventd")
	if err := c.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != fasthttp.StatusCreated || len(resp.Body()) <= 4096 {
		t.Fatalf("status %d, %d bytes; want 201 and an answer over 4 KiB", resp.StatusCode(), len(resp.Body()))
	}
	if n := ln.writes.Load(); n != 1 {
		t.Errorf("the answer took %d writes, want 1", n)
	}
}
