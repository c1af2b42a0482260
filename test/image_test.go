package test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// podman runs podman with a deadline and returns its combined output.
func podman(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(withoutSystemdNoise(out.String())), err
}

// withoutSystemdNoise drops the lines podman logs when it cannot reach
// systemd to schedule the image's HEALTHCHECK (no systemd in a container):
// they are not the command's output, and the test runs the check itself.
func withoutSystemdNoise(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "systemd connection") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// runOptions finds podman run options this host accepts, trying the image's
// `eventd version` with each. Podman's defaults raise RLIMIT_NOFILE and
// RLIMIT_NPROC and, with crun, need a pure cgroup v2 host: a sandbox without
// CAP_SYS_RESOURCE or with hybrid cgroups (this project's CI container)
// refuses both, so the fallback is runc with limits no higher than ours.
func runOptions(t *testing.T, image string) ([]string, []string) {
	t.Helper()
	var nofile syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	candidates := [][]string{nil}
	if _, err := exec.LookPath("runc"); err == nil {
		candidates = append(candidates, []string{"--runtime", "runc",
			"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile.Cur, nofile.Cur), "--ulimit", "nproc=4096:4096"})
	}
	var failures []string
	for _, opts := range candidates {
		out, err := podman(t, 2*time.Minute, append(append([]string{"run", "--rm"}, opts...), image, "version")...)
		if err == nil && strings.Contains(out, "version: e2e") {
			return opts, nil
		}
		failures = append(failures, fmt.Sprintf("podman run %s: %v: %s", strings.Join(opts, " "), err, out))
	}
	return nil, failures
}

// TestContainerImage builds the image with `make image` (FROM scratch: no
// registry, no pull), checks its configuration, starts it, probes /healthz
// through the published port, runs its HEALTHCHECK and stops it cleanly.
// Without podman, or where podman cannot run containers, it skips and says why.
func TestContainerImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (Debian: apt-get install podman): the image is neither built nor run here")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed: `make image` cannot run")
	}
	if out, err := podman(t, time.Minute, "info"); err != nil {
		t.Skipf("podman cannot run here: podman info: %v\n%s", err, out)
	}
	image := fmt.Sprintf("localhost/eventd-e2e:%d", os.Getpid())
	ctxDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	build := exec.CommandContext(ctx, "make", "-C", "..", "image", "IMAGE="+image, "VERSION=e2e", "IMAGE_CTX="+ctxDir, "CONTAINER=podman",
		"BUILD_FLAGS=--layers=false") // no intermediate images left behind once the test removes its own
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = podman(t, time.Minute, "rmi", "-f", image) })

	// The image's configuration: no root, the data volume, the health check.
	for _, tc := range []struct{ format, want string }{
		{"{{.Config.User}}", "65532:65532"},
		{"{{json .Config.Volumes}}", `{"/data":{}}`},
		{"{{json .HealthCheck.Test}}", `["CMD","/eventd","healthcheck"]`},
		{"{{json .Config.Entrypoint}}", `["/eventd"]`},
	} {
		out, err := podman(t, time.Minute, "image", "inspect", "--format", tc.format, image)
		if err != nil || out != tc.want {
			t.Errorf("image %s = %q (%v), want %q", tc.format, out, err, tc.want)
		}
	}

	// Nothing from a base image: the image is the binary and the CA bundle,
	// give or take the tar headers.
	var files int64
	for _, f := range []string{"eventd", "ca-certificates.crt"} {
		fi, err := os.Stat(filepath.Join(ctxDir, f))
		if err != nil {
			t.Fatal(err)
		}
		files += fi.Size()
	}
	if out, err := podman(t, time.Minute, "image", "inspect", "--format", "{{.Size}}", image); err != nil {
		t.Errorf("image size: %v %s", err, out)
	} else if size, err := strconv.ParseInt(out, 10, 64); err != nil || size > files+1<<20 {
		t.Errorf("image is %s bytes, its files %d: more than a scratch image should hold", out, files)
	}

	opts, failures := runOptions(t, image)
	if failures != nil {
		t.Skipf("podman cannot run containers here:\n%s", strings.Join(failures, "\n"))
	}
	name := fmt.Sprintf("eventd-e2e-%d", os.Getpid())
	args := append([]string{"run", "-d", "--name", name}, opts...)
	// No ballast and no free-space floor, as in the rest of the suite: the
	// point is the image, not the host's free space.
	args = append(args, "-e", "EVENTD_BALLAST_SIZE=0", "-e", "EVENTD_MIN_FREE_DISK=0", "-p", "127.0.0.1::8080", image)
	if out, err := podman(t, 2*time.Minute, args...); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = podman(t, time.Minute, "rm", "-f", "-v", name) })
	logs := func() string { out, _ := podman(t, time.Minute, "logs", name); return out }

	port, err := podman(t, time.Minute, "port", name, "8080/tcp")
	if err != nil || port == "" {
		t.Fatalf("podman port: %v %q\n%s", err, port, logs())
	}
	url := "http://" + strings.Fields(port)[0] + "/healthz"
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(body.String(), `"status":"ok"`) {
				break
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		if state, _ := podman(t, time.Minute, "inspect", "--format", "{{.State.Status}}", name); state != "running" {
			t.Fatalf("container %s before /healthz answered (%v)\n%s", state, err, logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v after 60 s\n%s", url, err, logs())
		}
		time.Sleep(100 * time.Millisecond) // poll interval, not a synchronisation
	}

	// The image's own HEALTHCHECK, run by podman inside the container.
	if out, err := podman(t, time.Minute, "healthcheck", "run", name); err != nil {
		t.Fatalf("podman healthcheck run: %v %s\n%s", err, out, logs())
	}
	if out, err := podman(t, time.Minute, "exec", name, "/eventd", "version"); err != nil || !strings.Contains(out, "version: e2e") {
		t.Fatalf("eventd version in the container: %v %q", err, out)
	}
	// SIGTERM stops it cleanly: exit status 0, well before podman's SIGKILL.
	if out, err := podman(t, 2*time.Minute, "stop", "-t", "60", name); err != nil {
		t.Fatalf("podman stop: %v %s", err, out)
	}
	if code, err := podman(t, time.Minute, "inspect", "--format", "{{.State.ExitCode}}", name); err != nil || code != "0" {
		t.Fatalf("exit code %q (%v) after SIGTERM\n%s", code, err, logs())
	}
}
