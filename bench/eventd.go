package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The bench drives eventd as a user would, through its binary, flags and
// HTTP APIs only; it imports nothing of the server.

// RepoModule is the module path FindRepoRoot looks for.
const RepoModule = "github.com/eventd/eventd"

// FindRepoRoot walks up from dir to the eventd module root, so the bench can
// build the server from wherever it is started inside the repository.
func FindRepoRoot(dir string) (string, error) {
	for d := dir; ; {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module "+RepoModule+"\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of %s above %s", RepoModule, dir)
		}
		d = parent
	}
}

// BuildEventd builds ./cmd/eventd of the repository at root into out.
func BuildEventd(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/eventd")
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/eventd: %v\n%s", err, buf.String())
	}
	return nil
}

// FreeAddr finds a free loopback port. Another process may take it before
// it is used; good enough for a bench that starts its own server.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// RandomToken is a hex secret for the admin token of a server we start.
func RandomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// EventdOptions starts an eventd server for a bench run.
type EventdOptions struct {
	Bin     string
	DataDir string   // fresh directory for Pebble; must exist or be creatable
	LogPath string   // server's stdout and stderr
	Env     []string // added to this process's environment
	// Args are extra flags after "serve".
	Args []string
	// StartTimeout bounds the wait for /healthz; 0 means 60 s.
	StartTimeout time.Duration
}

// Eventd is a running server process.
type Eventd struct {
	URL        string
	AdminURL   string
	AdminToken string
	LogPath    string
	// Admin calls the server's admin API with its token.
	Admin   *Admin
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logFile *os.File
	opts    EventdOptions
}

// StartEventd runs `eventd serve` on free loopback ports and waits until
// /healthz answers 200.
func StartEventd(ctx context.Context, o EventdOptions) (*Eventd, error) {
	listen, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	e := &Eventd{
		URL:        "http://" + listen,
		AdminURL:   "http://" + admin,
		AdminToken: RandomToken(),
		LogPath:    o.LogPath,
		exited:     make(chan struct{}),
		logFile:    logf,
		opts:       o,
	}
	e.Admin = &Admin{URL: e.AdminURL, Token: e.AdminToken}
	args := append([]string{"serve",
		"--data", o.DataDir,
		"--listen", listen,
		"--admin-listen", admin,
		"--admin-token", e.AdminToken,
	}, o.Args...)
	e.cmd = exec.Command(o.Bin, args...)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	e.cmd.Env = append(os.Environ(), o.Env...)
	if err := e.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		e.waitErr = e.cmd.Wait()
		close(e.exited)
	}()
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	if err := e.waitHealthy(ctx, timeout); err != nil {
		_ = e.Stop(5 * time.Second)
		return nil, fmt.Errorf("%v (server log: %s)\n%s", err, e.LogPath, e.LogTail(20))
	}
	return e, nil
}

// KillRestart kills the server with SIGKILL and starts it again on the same
// data directory, logging to logPath; it returns the new server and how long
// the start took, from exec to the first healthy /healthz.
func (e *Eventd) KillRestart(ctx context.Context, logPath string) (*Eventd, time.Duration, error) {
	_ = e.cmd.Process.Kill()
	<-e.exited
	e.logFile.Close()
	o := e.opts
	o.LogPath = logPath
	start := time.Now()
	n, err := StartEventd(ctx, o)
	return n, time.Since(start), err
}

// PID is the server's process id, for profiles and memory readings.
func (e *Eventd) PID() int { return e.cmd.Process.Pid }

func (e *Eventd) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(e.URL + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-e.exited:
			return fmt.Errorf("eventd exited before it was healthy: %v", e.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("eventd not healthy after %v", timeout)
		}
	}
}

// Limits are a project's custom rate limits.
type Limits struct {
	Minute int64 `json:"minute"`
	Hour   int64 `json:"hour"`
	Day    int64 `json:"day"`
}

// BenchLimits are high enough that a closed-loop run on one machine never
// meets them (batches get a tenth of them, still far out of reach).
var BenchLimits = Limits{Minute: 100_000_000, Hour: 1_000_000_000, Day: 10_000_000_000}

// Admin is a client of eventd's admin API (bearer token), used to set up
// projects and keys for a run, read /metrics and fetch profiles.
type Admin struct {
	URL   string // base URL of the admin listener
	Token string
}

// Project is the part of a created project the bench needs.
type Project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Plan string `json:"plan"`
}

// CreateProject creates a project; limits nil means the plan's own.
func (a *Admin) CreateProject(ctx context.Context, name, plan string, limits *Limits) (*Project, error) {
	var p Project
	body := map[string]any{"name": name, "plan": plan}
	if limits != nil {
		body["limits"] = limits
	}
	if err := a.call(ctx, "POST", "/admin/v1/projects", body, &p); err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, errors.New("create project: no id in the answer")
	}
	return &p, nil
}

// CreateKey creates a live secret key in a project and returns its text,
// which the server shows only this once.
func (a *Admin) CreateKey(ctx context.Context, projectID, name string) (string, error) {
	var k struct {
		Key string `json:"key"`
	}
	err := a.call(ctx, "POST", "/admin/v1/projects/"+projectID+"/keys",
		map[string]any{"name": name, "type": "secret", "environment": "live"}, &k)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(k.Key, "sk_live_") {
		return "", fmt.Errorf("create key: unexpected key %q", k.Key)
	}
	return k.Key, nil
}

// CreateKeys creates n keys in a project, a few at a time.
func (a *Admin) CreateKeys(ctx context.Context, projectID, prefix string, n int) ([]string, error) {
	keys := make([]string, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			k, err := a.CreateKey(ctx, projectID, fmt.Sprintf("%s-%d", prefix, i))
			if err != nil {
				errs <- err
				return
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return keys, nil
}

// ResetCursor creates or moves the named cursor of a project's live
// dataset to "head", an event id or an RFC 3339 time (POST
// .../cursors/{name}/reset), with no consumer connected.
func (a *Admin) ResetCursor(ctx context.Context, projectID, name, to string) error {
	var c map[string]any
	return a.call(ctx, "POST", "/admin/v1/projects/"+projectID+"/cursors/"+url.PathEscape(name)+"/reset?environment=live",
		map[string]any{"to": to}, &c)
}

// CreateProjectKey creates a project through the admin API and a live secret
// key in it, returning the key text (shown only once by the server).
func (e *Eventd) CreateProjectKey(ctx context.Context, name, plan string, limits *Limits) (projectID, key string, err error) {
	p, err := e.Admin.CreateProject(ctx, name, plan, limits)
	if err != nil {
		return "", "", err
	}
	key, err = e.Admin.CreateKey(ctx, p.ID, name)
	return p.ID, key, err
}

// Get fetches an admin-listener path (e.g. /metrics) with the token.
func (a *Admin) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", a.URL+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		if len(b) > 200 {
			b = b[:200]
		}
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// SaveProfile fetches /debug/pprof/<name>?<query> into file.
func (a *Admin) SaveProfile(ctx context.Context, name, query, file string) error {
	path := "/debug/pprof/" + name
	if query != "" {
		path += "?" + query
	}
	b, err := a.Get(ctx, path)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

func (a *Admin) call(ctx context.Context, method, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, a.URL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(rb))
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("%s %s: %v in %s", method, path, err, rb)
	}
	return nil
}

// Stop sends SIGTERM (the graceful path the contract promises) and waits;
// after timeout it kills the process and says so.
func (e *Eventd) Stop(timeout time.Duration) error {
	defer e.logFile.Close()
	select {
	case <-e.exited:
		return e.exitErr()
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
		return e.exitErr()
	case <-time.After(timeout):
		_ = e.cmd.Process.Kill()
		<-e.exited
		return fmt.Errorf("eventd did not exit within %v of SIGTERM; killed", timeout)
	}
}

func (e *Eventd) exitErr() error {
	if e.waitErr != nil {
		return fmt.Errorf("eventd exited: %v", e.waitErr)
	}
	return nil
}

// Exited reports whether the server has stopped on its own, so a bench can
// stop early instead of measuring connection errors.
func (e *Eventd) Exited() bool {
	select {
	case <-e.exited:
		return true
	default:
		return false
	}
}

// LogTail returns the last n lines of the server's log, for error messages.
func (e *Eventd) LogTail(n int) string {
	b, err := os.ReadFile(e.LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
