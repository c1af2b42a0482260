package client_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The client is tested against the real eventd binary, built and started
// once for the package like the end-to-end suite in ./test does; each test
// makes its own project, so they run in parallel.

const adminToken = "adm_client_test_0123456789"

var srv struct {
	public, admin string
	missing       string // why there is no server, when there is none
	cmd           *exec.Cmd
	logs          bytes.Buffer
	mu            sync.Mutex
}

var listenRE = regexp.MustCompile(`msg="eventd listening" public=(\S+) admin=(\S+)`)

func TestMain(m *testing.M) {
	code, err := runWithServer(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runWithServer(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "eventd-client-test")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// The client is its own module and imports nothing of the server: the
	// server is built from the repository around it, as a separate program.
	// Outside the repository (the module cache) there is no server to build,
	// and the tests that need one skip.
	root, err := filepath.Abs("../..")
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "eventd", "main.go")); err != nil {
		srv.missing = "no eventd source at " + root + " (the client is tested outside its repository)"
		return m.Run(), nil
	}
	bin := filepath.Join(dir, "eventd")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/eventd")...)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("build eventd: %w", err)
	}
	cmd := exec.Command(bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--admin-token", adminToken, "--log-level", "info")
	stderr, _ := cmd.StderrPipe()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	srv.cmd = cmd
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	addrs := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			srv.mu.Lock()
			srv.logs.WriteString(sc.Text() + "\n")
			srv.mu.Unlock()
			if a := listenRE.FindStringSubmatch(sc.Text()); a != nil {
				addrs <- a[1:]
			}
		}
	}()
	select {
	case a := <-addrs:
		srv.public, srv.admin = "http://"+a[0], "http://"+a[1]
	case <-time.After(30 * time.Second):
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return 0, fmt.Errorf("eventd did not start within 30 s:\n%s", srv.logs.String())
	}
	return m.Run(), nil
}

// admin calls the admin API and decodes the JSON answer.
func admin(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	if srv.missing != "" {
		t.Skip(srv.missing)
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, srv.admin+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return m
}

var bigLimits = map[string]int64{"minute": 1000000, "hour": 10000000, "day": 100000000}

// project creates a project (enterprise plan unless limits say otherwise) and returns its id.
func project(t *testing.T, limits map[string]int64) string {
	t.Helper()
	body := map[string]any{"name": t.Name(), "plan": "enterprise"}
	if limits != nil {
		body["limits"] = limits
	}
	return admin(t, "POST", "/admin/v1/projects", body)["id"].(string)
}

// key creates an API key of the project: typ "secret" or "public", env "live" or "test".
func key(t *testing.T, projectID, typ, env string) string {
	t.Helper()
	return admin(t, "POST", "/admin/v1/projects/"+projectID+"/keys",
		map[string]any{"name": typ, "type": typ, "environment": env})["key"].(string)
}

// proxy is a TCP relay on loopback between the client and eventd that can
// fail connections on purpose: drop the next connections once the server has
// answered (the request was processed, the client never hears so), or cut
// every open connection.
type proxy struct {
	ln       net.Listener
	target   string
	drop     atomic.Int32 // connections still to drop
	dropped  atomic.Int32
	accepted atomic.Int32
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func newProxy(t *testing.T, targetURL string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: targetURL[len("http://"):], conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		_ = ln.Close()
		p.KillAll()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			go p.handle(c)
		}
	}()
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *proxy) handle(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.track(c, s)
	defer p.untrack(c, s)
	if p.drop.Add(-1) >= 0 {
		go func() { _, _ = io.Copy(s, c) }()
		// The first byte of the answer means the server is done with the
		// request (for a write: committed); the client never gets it.
		var b [1]byte
		_, _ = s.Read(b[:])
		p.dropped.Add(1)
		return
	}
	p.drop.Add(1) // undo: this connection is not one to drop
	go func() {
		_, _ = io.Copy(s, c)
		p.untrack(c, s)
	}()
	_, _ = io.Copy(c, s)
}

// KillAll cuts every open connection, as a network failure would.
func (p *proxy) KillAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// countingTransport counts the HTTP attempts the client makes.
type countingTransport struct {
	n  atomic.Int32
	rt http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}
