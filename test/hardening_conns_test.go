package test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startWithFileLimit runs eventd with soft and hard RLIMIT_NOFILE set to
// nofile (through a shell's ulimit, then exec, so the pid is eventd's).
func startWithFileLimit(t *testing.T, nofile int, extra ...string) *Server {
	t.Helper()
	script := filepath.Join(t.TempDir(), "eventd-limited")
	body := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\nexec %q \"$@\"\n", nofile, binary)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return startBin(t, script, extra...)
}

// alive fails the test if the server process has exited.
func (s *Server) alive(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("eventd exited: %v\n%s", s.exitErr, s.Logs())
	default:
	}
}

// heldConn is a connection that was served one request and is kept open.
type heldConn struct {
	net.Conn
	r *bufio.Reader
}

// hold dials with dial, sends GET /healthz and reads the answer. It returns
// the connection kept alive if the server answered 200, or nil if the server
// closed the connection without a byte (over a connection cap).
func hold(t *testing.T, dial func() (net.Conn, error)) *heldConn {
	t.Helper()
	c, err := dial()
	if err != nil {
		// TLS: a handshake on a connection the server closed at once fails here.
		if msg := err.Error(); strings.Contains(msg, "EOF") || strings.Contains(msg, "reset") || strings.Contains(msg, "broken pipe") {
			return nil
		}
		t.Fatalf("dial: %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, werr := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: eventd\r\n\r\n")
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		_ = c.Close()
		if n := r.Buffered(); n > 0 {
			t.Fatalf("connection closed after %d bytes, want none or a full answer", n)
		}
		if strings.Contains(err.Error(), "timeout") {
			t.Fatalf("server neither answered nor closed: %v (write %v)", err, werr)
		}
		return nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /healthz on a held connection: %d", resp.StatusCode)
	}
	_ = c.SetDeadline(time.Time{})
	return &heldConn{Conn: c, r: r}
}

func tcpDialer(addr string, from string) func() (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return func() (net.Conn, error) { return d.Dial("tcp", addr) }
}

func hostPort(url string) string {
	return url[strings.Index(url, "://")+3:]
}

// connMetric reads one series from the admin listener's /metrics over a
// fresh connection.
func connMetric(t *testing.T, hc *http.Client, adminURL, series string) float64 {
	t.Helper()
	resp, err := hc.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return metricValue(t, string(b), series)
}

// freshClient opens a new connection per request, so that no idle
// keep-alive connection of the test counts against the caps.
func freshClient(tlsConf *tls.Config) *http.Client {
	return &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConf}}
}

// pollHealthz waits until GET url/healthz answers 200 on a new connection.
func pollHealthz(t *testing.T, s *Server, hc *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		s.alive(t)
		resp, err := hc.Get(url + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz did not answer 200 again: %v\n%s", url, err, s.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConnsCapUnderDescriptorLimit: with 512 descriptors the default cap is
// 128 connections per listener; 700 connections to the public listener leave
// the process running, exactly 128 are served and kept, every other one is
// closed at once and counted, and the listener serves again once they close.
func TestConnsCapUnderDescriptorLimit(t *testing.T) {
	s := startWithFileLimit(t, 512)
	for _, want := range []string{"soft=512 hard=512", "max_conns=128 max_conns_per_ip=4096"} {
		if !strings.Contains(s.Logs(), want) {
			t.Fatalf("start log lacks %q:\n%s", want, s.Logs())
		}
	}
	dial := tcpDialer(hostPort(s.Public), "")
	const total = 700
	var held []*heldConn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	rejected := 0
	for range total {
		if c := hold(t, dial); c != nil {
			held = append(held, c)
		} else {
			rejected++
		}
	}
	s.alive(t)
	if len(held) != 128 {
		t.Fatalf("%d connections served and kept, want the cap of 128 (%d closed)", len(held), rejected)
	}
	// While they are held, a new connection is closed before it is read.
	if c := hold(t, dial); c != nil {
		_ = c.Close()
		t.Fatal("a connection over the cap was served")
	}
	rejected++
	hc := freshClient(nil)
	if v := connMetric(t, hc, s.Admin, `eventd_http_connections_rejected_total{listener="public",reason="max_conns"}`); v != float64(rejected) {
		t.Fatalf("rejected max_conns = %v, want %d", v, rejected)
	}
	if v := connMetric(t, hc, s.Admin, `eventd_http_open_connections{listener="public"}`); v != 128 {
		t.Fatalf("open public connections = %v, want 128", v)
	}
	// The held connections still work.
	if _, err := io.WriteString(held[0], "GET /healthz HTTP/1.1\r\nHost: eventd\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = held[0].SetDeadline(time.Now().Add(30 * time.Second))
	if resp, err := http.ReadResponse(held[0].r, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("held connection: %v %v", resp, err)
	}
	for _, c := range held {
		_ = c.Close()
	}
	held = nil
	pollHealthz(t, s, hc, s.Public)
	// Every place is given back once the server has seen the closes.
	deadline := time.Now().Add(60 * time.Second)
	for v := -1.0; v != 0; v = connMetric(t, hc, s.Admin, `eventd_http_open_connections{listener="public"}`) {
		if time.Now().After(deadline) {
			t.Fatalf("open public connections = %v after all closed, want 0", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(s.Logs(), `msg="connection cap reached, closing new connections" listener=public reason=max_conns`) {
		t.Fatalf("no warning about the cap:\n%s", s.Logs())
	}
	s.alive(t)
}

// TestConnsDescriptorExhaustion: with the cap above the descriptor limit,
// accept fails with EMFILE; eventd retries with backoff instead of stopping,
// and serves again once the connections are gone.
func TestConnsDescriptorExhaustion(t *testing.T) {
	s := startWithFileLimit(t, 512, "--max-conns", "100000", "--max-conns-per-ip", "0")
	dial := tcpDialer(hostPort(s.Public), "")
	var conns []net.Conn
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close()
		}
		conns = nil
	}
	t.Cleanup(closeAll)
	// Idle connections, as slow clients hold them. The kernel completes the
	// handshake of those eventd cannot accept yet (listen backlog).
	for range 700 {
		c, err := dial()
		if err != nil {
			t.Fatalf("dial: %v (after %d)", err, len(conns))
		}
		conns = append(conns, c)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(s.Logs(), "accept failed, retrying with backoff") {
		s.alive(t)
		if time.Now().After(deadline) {
			t.Fatalf("no accept-failure warning with 700 connections and 512 descriptors:\n%s", s.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(s.Logs(), "accept failed"); n != 1 {
		t.Fatalf("accept failure logged %d times, want once:\n%s", n, s.Logs())
	}
	s.alive(t)
	closeAll()
	hc := freshClient(nil)
	pollHealthz(t, s, hc, s.Public)
	pollHealthz(t, s, hc, s.Admin)
	if v := connMetric(t, hc, s.Admin, `eventd_http_accept_errors_total{listener="public"}`); v < 1 {
		t.Fatalf("accept errors on the public listener = %v, want at least 1", v)
	}
	if strings.Contains(s.Logs(), "listener failed") {
		t.Fatalf("a listener stopped:\n%s", s.Logs())
	}
	s.alive(t)
}

// TestConnsPerIPCap: over --max-conns-per-ip, a new connection from the same
// address is closed at once and counted; another address still gets in, and
// closing one frees its place.
func TestConnsPerIPCap(t *testing.T) {
	s := Start(t, "--max-conns-per-ip", "5")
	addr := hostPort(s.Public)
	var held []*heldConn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	for i := range 5 {
		c := hold(t, tcpDialer(addr, "127.0.0.1"))
		if c == nil {
			t.Fatalf("connection %d of 5 was closed", i+1)
		}
		held = append(held, c)
	}
	if c := hold(t, tcpDialer(addr, "127.0.0.1")); c != nil {
		_ = c.Close()
		t.Fatal("a 6th connection from one IP was served")
	}
	hc := freshClient(nil)
	if v := connMetric(t, hc, s.Admin, `eventd_http_connections_rejected_total{listener="public",reason="max_conns_per_ip"}`); v != 1 {
		t.Fatalf("rejected max_conns_per_ip = %v, want 1", v)
	}
	if v := connMetric(t, hc, s.Admin, `eventd_http_connections_rejected_total{listener="public",reason="max_conns"}`); v != 0 {
		t.Fatalf("rejected max_conns = %v, want 0", v)
	}
	// Another loopback address is another client.
	other := hold(t, tcpDialer(addr, "127.0.0.2"))
	if other == nil {
		t.Fatal("a connection from 127.0.0.2 was closed although that IP holds none")
	}
	held = append(held, other)
	// Once one closes, the server notices (read EOF), and there is room again.
	_ = held[0].Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c := hold(t, tcpDialer(addr, "127.0.0.1")); c != nil {
			held = append(held, c)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closing a connection did not free its place under the per-IP cap")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.alive(t)
}

// TestConnsCapOverTLS: the caps apply under TLS too, before the handshake.
func TestConnsCapOverTLS(t *testing.T) {
	certFile, keyFile := selfSignedCert(t)
	s := Start(t, "--tls-cert", certFile, "--tls-key", keyFile, "--max-conns-per-ip", "2")
	insecure := &tls.Config{InsecureSkipVerify: true} // the test's own self-signed certificate
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 30 * time.Second}, Config: insecure}
	dial := func() (net.Conn, error) { return d.Dial("tcp", hostPort(s.Public)) }
	var held []*heldConn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	for range 2 {
		c := hold(t, dial)
		if c == nil {
			t.Fatal("a TLS connection under the cap was closed")
		}
		held = append(held, c)
	}
	if c := hold(t, dial); c != nil {
		_ = c.Close()
		t.Fatal("a 3rd TLS connection from one IP was served")
	}
	adm := strings.Replace(s.Admin, "http://", "https://", 1)
	if v := connMetric(t, freshClient(insecure), adm, `eventd_http_connections_rejected_total{listener="public",reason="max_conns_per_ip"}`); v != 1 {
		t.Fatalf("rejected max_conns_per_ip over TLS = %v, want 1", v)
	}
}

// TestHeadersSize: a 12 KiB cookie header is served as usual; headers over
// 16 KiB answer 431 headers_too_large with a JSON body, on both listeners.
func TestHeadersSize(t *testing.T) {
	s := Start(t)
	cookie := "Cookie: session=" + strings.Repeat("c", 12<<10)
	wantStatus(t, Do(t, "GET", s.Public+"/healthz", "", nil, cookie), 200)
	r := Do(t, "GET", s.Admin+"/admin/v1/projects", s.Token, nil, cookie)
	wantStatus(t, r, 200)
	big := "Cookie: session=" + strings.Repeat("c", 20<<10)
	wantError(t, Do(t, "GET", s.Public+"/healthz", "", nil, big), 431, "headers_too_large", "Request headers are larger than 16 KiB")
	wantError(t, Do(t, "GET", s.Admin+"/admin/v1/projects", s.Token, nil, big), 431, "headers_too_large", "Request headers are larger than 16 KiB")
}
