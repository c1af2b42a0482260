package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/eventd/eventd/bench"
)

// startCeiling serves a ceiling's server in a child process (this binary
// run with args, which calls serveChild) by default: eventd runs in its own
// process with its own Go scheduler, and a ceiling should be measured the
// same way. inProc serves it in this process with serve instead; its CPU
// time is then not measured (pid 0).
func startCeiling(inProc bool, serve serveFunc, args ...string) (url string, pid int, stop func(), err error) {
	if !inProc {
		return startChild(args...)
	}
	url, closeFn, err := serve()
	if err != nil {
		return "", 0, nil, err
	}
	return url, 0, func() { _ = closeFn() }, nil
}

// serveFunc starts a ceiling's server and says where it listens.
type serveFunc func() (url string, close func() error, err error)

// serveNoop serves the no-op ceiling on addr ("" picks a loopback port).
func serveNoop(addr string) serveFunc {
	return func() (string, func() error, error) {
		n, err := bench.StartNoop(addr)
		if err != nil {
			return "", nil, err
		}
		return n.URL, n.Close, nil
	}
}

// serveFsyncNoop serves the durability floor on addr, its log in dir, each
// sync followed by delay.
func serveFsyncNoop(addr, dir string, delay time.Duration) serveFunc {
	return func() (string, func() error, error) {
		n, err := bench.StartFsyncNoop(bench.FsyncNoopOptions{Addr: addr, Dir: dir, FsyncDelay: delay})
		if err != nil {
			return "", nil, err
		}
		return n.URL, n.Close, nil
	}
}

// startChild runs this binary with args as a ceiling's server (serveChild
// on the other side), and returns the URL it printed and its PID, for its
// CPU time.
func startChild(args ...string) (url string, pid int, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(self, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", 0, nil, fmt.Errorf("child did not report its address (%q, %v)", line, err)
	}
	stop = func() {
		stdin.Close() // the child exits when its stdin closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	return strings.TrimSpace(line), cmd.Process.Pid, stop, nil
}

// serveChild is the child side: start the server, print its URL, and close
// it when the parent closes stdin (also when the parent dies) or on a
// signal.
func serveChild(start serveFunc) int {
	url, closeFn, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventd-bench child:", err)
		return 1
	}
	fmt.Println(url)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	select {
	case <-sig:
	case <-eof:
	}
	if err := closeFn(); err != nil {
		fmt.Fprintln(os.Stderr, "eventd-bench child:", err)
	}
	return 0
}
