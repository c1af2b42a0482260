package test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// driverProcess is a node script in test/browser that drives headless
// Chromium, taking commands on stdin and answering one JSON line each.
type driverProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *bytes.Buffer
}

// startDriver starts script and waits for its ready line, or skips the test
// (saying what is missing) when Chromium, node or playwright-core is not
// installed; make test installs them. label names the test in the message.
func startDriver(t *testing.T, script, label string) *driverProcess {
	t.Helper()
	chromium := os.Getenv("EVENTD_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("SKIP %s: no Chromium at %s (apt-get install chromium, or `make browser-deps`; EVENTD_CHROMIUM overrides the path)", label, chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("SKIP %s: node is not installed", label)
	}
	dir, _ := filepath.Abs("browser")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		t.Skipf("SKIP %s: test/browser/node_modules lacks playwright-core (run `make browser-deps`, i.e. npm ci in test/browser)", label)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EVENTD_CHROMIUM="+chromium)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	p := &driverProcess{cmd: cmd, stdin: stdin, lines: make(chan []byte, 16), stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start node: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<16), 16<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		_ = stdin.Close() // the driver closes Chromium and exits when stdin ends
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		cancel()
	})
	select {
	case l, ok := <-p.lines:
		if !ok || !bytes.Contains(l, []byte(`"ready":true`)) {
			t.Fatalf("browser driver did not start: %s\n%s", l, p.stderr)
		}
		t.Logf("driver: %s", l)
	case <-time.After(60 * time.Second):
		t.Fatalf("browser driver did not start within 60 s\n%s", p.stderr)
	}
	return p
}
