package http

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// resetConn is a client that sent its request and reset the connection:
// reads give the request, writes fail.
type resetConn struct {
	net.Conn // nil: only the methods below are used
	r        *strings.Reader
}

func (c *resetConn) Read(b []byte) (int, error) { return c.r.Read(b) }
func (c *resetConn) Write([]byte) (int, error)  { return 0, errors.New("connection reset by peer") }
func (c *resetConn) Close() error               { return nil }
func (c *resetConn) LocalAddr() net.Addr        { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080} }
func (c *resetConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *resetConn) SetDeadline(time.Time) error      { return nil }
func (c *resetConn) SetReadDeadline(time.Time) error  { return nil }
func (c *resetConn) SetWriteDeadline(time.Time) error { return nil }

// TestUpgradeReleasedWhen101Fails: fasthttp never runs an upgrade's
// handler when writing the 101 fails; the stream's slot in its key's
// limit, its tracking and its cursor must still be released, or a client
// resetting connections would use up its key's streams for good.
func TestUpgradeReleasedWhen101Fails(t *testing.T) {
	eng, _, key := testEngine(t)
	s := New(Config{Engine: eng, AdminToken: "t"})
	p := eng.Authenticate([]byte(key.Key))
	const n = 8 // over the free plan's 5 streams per key
	for i := range n {
		query := ""
		if i%2 == 1 {
			query = "?cursor=c"
		}
		req := "GET /stream" + query + " HTTP/1.1\r\nHost: eventd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer " + key.Key + "\r\n\r\n"
		if err := s.public.ServeConn(&resetConn{r: strings.NewReader(req)}); err == nil {
			t.Fatalf("upgrade %d: served without an error", i)
		}
	}
	s.streams.mu.Lock()
	tracked := len(s.streams.subs)
	s.streams.mu.Unlock()
	if tracked != 0 {
		t.Errorf("%d streams still tracked", tracked)
	}
	if !p.AcquireStream() {
		t.Error("the key's stream slots were not given back")
	}
	p.ReleaseStream()
	cs, err := eng.ListCursors(p.ProjectID(), "live")
	if err != nil || len(cs) != 1 || cs[0].Connected {
		t.Errorf("cursors %+v %v, want c, not connected", cs, err)
	}
}
