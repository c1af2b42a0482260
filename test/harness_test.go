package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the eventd binary built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "eventd-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "eventd")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/eventd")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build eventd:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Server is a running eventd process.
type Server struct {
	t       testing.TB
	Dir     string // data directory
	Token   string // admin token
	Public  string // http://127.0.0.1:port
	Admin   string
	Args    []string // extra serve flags
	Env     []string
	NoToken bool   // start without --admin-token (the server generates or reads <data>/admin_token)
	Bin     string // binary to run; "" is the package's binary
	cmd     *exec.Cmd
	exited  chan struct{}
	mu      sync.Mutex
	stdout  bytes.Buffer
	logs    bytes.Buffer
	exitErr error
}

var (
	listenRE     = regexp.MustCompile(`msg="eventd listening" public=(\S+) admin=(\S+)`)
	jsonListenRE = regexp.MustCompile(`"msg":"eventd listening","public":"([^"]+)","admin":"([^"]+)"`)
)

// Start runs eventd on loopback ports chosen by the kernel with a fresh data
// directory; it stops the process when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return startBin(t, "", extra...)
}

// startBin is Start with another binary (or a script that execs one); "" is
// the package's binary.
func startBin(t testing.TB, bin string, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, Dir: t.TempDir(), Token: "adm_test_token_0123456789", Args: extra, Bin: bin}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill()
		}
	})
	return s
}

func (s *Server) start() {
	s.t.Helper()
	args := []string{"serve", "--data", s.Dir, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}
	if !s.NoToken {
		args = append(args, "--admin-token", s.Token)
	}
	// No ballast and no free-space floor: dozens of servers per run would
	// each reserve 256 MiB, and a nearly full CI disk would turn every write
	// into a 507. The disk tests set both (a later flag wins).
	args = append(args, "--log-level", "info", "--ballast-size", "0", "--min-free-disk", "0")
	s.launch(append(args, s.Args...), append(os.Environ(), s.Env...))
}

// launch runs the binary with exactly args and env and waits until it
// listens (it reads text and JSON logs alike).
func (s *Server) launch(args, env []string) {
	s.t.Helper()
	bin := binary
	if s.Bin != "" {
		bin = s.Bin
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start eventd: %v", err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	addrs := make(chan []string, 1)
	// cmd.Wait closes the pipes once the process exits, which may cut short
	// a reader that has not read everything yet (os/exec: "it is incorrect
	// to call Wait before all reads from the pipe have completed"): Wait
	// only after both readers reached the end of their pipe.
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		defer func() { _, _ = io.Copy(io.Discard, stderr) }() // past a line the scanner refused
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			m := listenRE.FindStringSubmatch(line)
			if m == nil {
				m = jsonListenRE.FindStringSubmatch(line)
			}
			if m != nil {
				select {
				case addrs <- m[1:]:
				default: // only the first counts; the reader must never block
				}
			}
		}
	}()
	go func() {
		defer readers.Done()
		b, _ := io.ReadAll(stdout)
		s.mu.Lock()
		s.stdout.Write(b)
		s.mu.Unlock()
	}()
	go func() {
		readers.Wait()
		err := cmd.Wait()
		s.mu.Lock()
		s.exitErr = err
		s.mu.Unlock()
		close(s.exited)
	}()
	select {
	case a := <-addrs:
		s.listening(a[0], a[1])
	case <-s.exited:
		s.t.Fatalf("eventd exited at start: %v\n%s", s.exitErr, s.Logs())
	case <-time.After(30 * time.Second):
		s.t.Fatalf("eventd did not start in 30 s\n%s", s.Logs())
	}
}

// listening points the server's addresses at a start's listeners (host:port).
// Ports are reused across the suite's servers, so both roles are recorded
// anew for the contract check (listenerIsAdmin).
func (s *Server) listening(public, admin string) {
	s.Public, s.Admin = "http://"+public, "http://"+admin
	listenerIsAdmin.Store(public, false)
	listenerIsAdmin.Store(admin, true)
}

// Logs is what the server wrote to stderr so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stdout is what the server printed to stdout so far (the first-start banner).
func (s *Server) Stdout() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdout.String()
}

// Kill ends the process with SIGKILL, as a crash would.
func (s *Server) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// Stop sends SIGTERM and returns the exit error (nil for exit status 0).
func (s *Server) Stop() error {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("eventd did not stop within 30 s of SIGTERM")
	}
	s.cmd = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitErr
}

// Restart starts the process again on the same data directory (new ports).
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.Kill()
	}
	s.start()
}

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map, failing the test if it is not an object.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

var client = &http.Client{Timeout: 30 * time.Second}

// Do sends a request; body may be nil, a string, []byte or a value to encode as JSON.
// headers are "Name: value" strings. A key of "" sends no Authorization.
// The response is checked against docs/openapi.yaml (checkContract): a
// status, header or body the document does not describe fails the test.
func Do(t testing.TB, method, url, key string, body any, headers ...string) *Response {
	t.Helper()
	return do(t, true, method, url, key, body, headers...)
}

// DoUnchecked is Do without the contract check, for the few requests that
// deliberately break the protocol (their answer is the point of the test,
// not the contract's). reason says why and must not be empty.
func DoUnchecked(t testing.TB, reason, method, url, key string, body any, headers ...string) *Response {
	t.Helper()
	if strings.TrimSpace(reason) == "" {
		t.Fatal("DoUnchecked needs a reason")
	}
	return do(t, false, method, url, key, body, headers...)
}

func do(t testing.TB, check bool, method, url, key string, body any, headers ...string) *Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		p, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(p)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if check {
		checkContract(t, req, resp.StatusCode, resp.Header, b)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// AdminDo calls the admin API with the server's token.
func (s *Server) AdminDo(t testing.TB, method, path string, body any) *Response {
	t.Helper()
	return Do(t, method, s.Admin+path, s.Token, body)
}

// Project creates a project and returns its id. plan "" keeps the default (free).
func (s *Server) Project(t testing.TB, name, plan string, limits map[string]int64) string {
	t.Helper()
	body := map[string]any{"name": name}
	if plan != "" {
		body["plan"] = plan
	}
	if limits != nil {
		body["limits"] = limits
	}
	r := s.AdminDo(t, "POST", "/admin/v1/projects", body)
	if r.Status != 201 {
		t.Fatalf("create project: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

// Key creates an API key and returns its text. typ is "secret" or "public", env "live" or "test".
func (s *Server) Key(t testing.TB, projectID, typ, env string) string {
	t.Helper()
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+projectID+"/keys", map[string]any{"name": typ + " " + env, "type": typ, "environment": env})
	if r.Status != 201 {
		t.Fatalf("create key: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["key"].(string)
}

// wantStatus fails the test when r does not have the status.
func wantStatus(t testing.TB, r *Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
}

// wantError checks an error response: status, error code and (if not "") message.
func wantError(t testing.TB, r *Response, status int, code, message string) map[string]any {
	t.Helper()
	wantStatus(t, r, status)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q", ct)
	}
	m := r.JSON(t)
	if m["error"] != code {
		t.Fatalf("error %v, want %q; body %s", m["error"], code, r.Body)
	}
	if message != "" && m["message"] != message {
		t.Fatalf("message %q, want %q", m["message"], message)
	}
	if r.Header.Get("X-Request-Id") == "" {
		t.Fatalf("no X-Request-Id on error response")
	}
	return m
}

// StartNoToken is Start without --admin-token: the server generates the token
// on first start and keeps it in <data>/admin_token, which s.Token then holds.
func StartNoToken(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, Dir: t.TempDir(), Args: extra, NoToken: true}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill()
		}
	})
	b, err := os.ReadFile(filepath.Join(s.Dir, "admin_token"))
	if err != nil {
		t.Fatalf("read generated admin token: %v", err)
	}
	s.Token = strings.TrimSpace(string(b))
	return s
}

var (
	fastOnce   sync.Once
	fastBinary string
	fastErr    error
)

// StartFast is Start with a server built without the race detector, for the
// few tests whose point is volume (a million imported events), which the
// detector would slow tenfold. Without -race it is the usual binary.
func StartFast(t testing.TB, extra ...string) *Server {
	t.Helper()
	if raceEnabled {
		fastOnce.Do(func() {
			fastBinary = binary + "-norace"
			out, err := exec.Command("go", "build", "-o", fastBinary, "../cmd/eventd").CombinedOutput()
			if err != nil {
				fastErr = fmt.Errorf("build eventd without -race: %v\n%s", err, out)
			}
		})
		if fastErr != nil {
			t.Fatal(fastErr)
		}
	}
	return startBin(t, fastBinary, extra...)
}
