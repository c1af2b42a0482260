package test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Contract section 11: a short disk never panics or wedges eventd.
const (
	diskBody       = `{"error":"insufficient_storage","message":"Not enough free disk space to store events"}`
	diskMinFree    = 16 << 20
	diskBallast    = 4 << 20
	diskVolumeSize = "64m"
)

// mountTmpfs mounts a small tmpfs for the test, or skips it where mounting
// is not allowed (not root, no mount namespace).
func mountTmpfs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+diskVolumeSize, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		// Lazy: the server (killed by a later cleanup, which runs first) may
		// still be closing files.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill grows the filler file until free space on the volume is at most
// leave bytes (0: the volume is full).
func fill(t *testing.T, vol string, leave int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(vol, "filler"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := 0; i < 1024; i++ { // bounded: the volume is 64 MiB
		free := freeBytes(t, vol)
		if free <= leave {
			return
		}
		n := min(int64(len(buf)), free-leave)
		if _, err := f.Write(buf[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatalf("could not fill %s", vol)
}

func unfill(t *testing.T, vol string) {
	t.Helper()
	if err := os.Remove(filepath.Join(vol, "filler")); err != nil {
		t.Fatal(err)
	}
}

// pollStatus sends a write until it gets want (the guard looks every second).
func pollStatus(t *testing.T, what string, send func() *Response, want int) *Response {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := send()
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %d %s after 30 s, want %d", what, r.Status, r.Body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func wantInsufficientStorage(t *testing.T, r *Response) {
	t.Helper()
	wantError(t, r, 507, "insufficient_storage", "Not enough free disk space to store events")
	if got := strings.TrimSpace(string(r.Body)); got != diskBody {
		t.Errorf("507 body %s, want %s", got, diskBody)
	}
	if ra := r.Header.Get("Retry-After"); ra != "30" {
		t.Errorf("Retry-After %q, want 30", ra)
	}
}

func diskGauge(t *testing.T, s *Server, name string) string {
	t.Helper()
	r := s.AdminDo(t, "GET", "/metrics", nil)
	wantStatus(t, r, 200)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(string(r.Body))
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	return m[1]
}

func TestHardeningDiskFull(t *testing.T) {
	vol := mountTmpfs(t)
	s := &Server{t: t, Dir: filepath.Join(vol, "data"), Token: "adm_test_token_0123456789",
		Args: []string{"--ballast-size", "4MiB", "--min-free-disk", fmt.Sprint(diskMinFree), "--shards", "2"}}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill()
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", s.Logs())
		}
	})
	if fi, err := os.Stat(filepath.Join(s.Dir, "ballast")); err != nil || fi.Size() != diskBallast {
		t.Fatalf("ballast: %v %v", fi, err)
	}
	project := s.Project(t, "disk", "enterprise", nil) // reads count too: stay far from the limit
	key := s.Key(t, project, "secret", "live")
	event := map[string]any{"event": "signup", "visitor_id": "v1", "properties": map[string]any{"plan": "pro"}}
	post := func() *Response { return Do(t, "POST", s.Public+"/events", key, event) }

	// Rate limit first, then 507, which counts in no window (docs/decisions.md):
	// tight has 5 an hour, 2 used; spent has 1 an hour, used.
	tight := s.Key(t, s.Project(t, "tight", "", map[string]int64{"minute": 100, "hour": 5, "day": 1000}), "secret", "live")
	spent := s.Key(t, s.Project(t, "spent", "", map[string]int64{"minute": 100, "hour": 1, "day": 1000}), "secret", "live")
	for _, k := range []string{tight, tight, spent} {
		wantStatus(t, Do(t, "POST", s.Public+"/events", k, event), 201)
	}
	hourRemaining := func(k string) float64 {
		t.Helper()
		r := Do(t, "GET", s.Public+"/rate-limit", k, nil) // counts in no bucket
		wantStatus(t, r, 200)
		return jobj(t, r.JSON(t), "limits", "hour")["remaining"].(float64)
	}

	var ids []string
	for range 20 {
		r := post()
		wantStatus(t, r, 201)
		ids = append(ids, r.JSON(t)["id"].(string))
	}
	readAll := func() {
		t.Helper()
		for _, id := range ids {
			if r := Do(t, "GET", s.Public+"/events/"+id, key, nil); r.Status != 200 {
				t.Fatalf("GET /events/%s: %d %s", id, r.Status, r.Body)
			}
		}
	}
	health := func() string {
		t.Helper()
		r := Do(t, "GET", s.Public+"/healthz", "", nil)
		wantStatus(t, r, 200)
		return strings.TrimSpace(string(r.Body))
	}
	if h := health(); h != `{"status":"ok"}` {
		t.Fatalf("/healthz %s before filling", h)
	}
	if v := diskGauge(t, s, "eventd_disk_writes_refused"); v != "0" {
		t.Fatalf("eventd_disk_writes_refused %s before filling", v)
	}

	// Under the threshold (still some room): writes are refused, reads work.
	fill(t, vol, diskMinFree/2)
	wantInsufficientStorage(t, pollStatus(t, "POST /events on a short disk", post, 507))
	wantInsufficientStorage(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{event}}))
	imp := s.AdminDo(t, "POST", "/admin/v1/projects/"+project+"/import", `{"event":"imported"}`+"\n")
	wantInsufficientStorage(t, imp)
	for range 5 {
		r := Do(t, "POST", s.Public+"/events", tight, event)
		wantInsufficientStorage(t, r)
		// Checked against the rate limit first, so the headers are there (and unchanged).
		if l, rem := r.Header.Get("X-RateLimit-Limit"), r.Header.Get("X-RateLimit-Remaining"); l == "" || rem == "" {
			t.Errorf("507 without rate-limit headers: %v", r.Header)
		}
	}
	if got := hourRemaining(tight); got != 3 {
		t.Errorf("hour remaining %v after five 507s, want 3: a refused write must not count", got)
	}
	wantError(t, Do(t, "POST", s.Public+"/events", spent, event), 429, "rate_limit_exceeded", "")
	readAll()
	if r := Do(t, "GET", s.Public+"/events?limit=100", key, nil); r.Status != 200 {
		t.Fatalf("GET /events on a short disk: %d %s", r.Status, r.Body)
	}
	if h := health(); h != `{"status":"degraded","reason":"disk"}` {
		t.Fatalf("/healthz %s on a short disk", h)
	}
	if v := diskGauge(t, s, "eventd_disk_writes_refused"); v != "1" {
		t.Fatalf("eventd_disk_writes_refused %s on a short disk", v)
	}
	if r := s.AdminDo(t, "GET", "/admin/v1/projects/"+project, nil); r.Status != 200 {
		t.Fatalf("admin API on a short disk: %d %s", r.Status, r.Body)
	}
	// The stream (a replay of what was stored) and the dashboard keep working.
	w := dial(t, wsURL(s, "?since="+ids[0]), bearer(key))
	readEventID(t, w, ids[len(ids)-1])
	if r := Do(t, "GET", s.Admin+"/", s.Token, nil); r.Status != 200 || !bytes.Contains(r.Body, []byte("/assets/app.js")) {
		t.Fatalf("dashboard on a short disk: %d", r.Status)
	}
	if n := strings.Count(s.Logs(), "refusing writes with 507"); n != 1 {
		t.Errorf("%d refusal log lines, want one per state change", n)
	}

	// Room again: writes resume by themselves.
	unfill(t, vol)
	r := pollStatus(t, "POST /events after freeing space", post, 201)
	ids = append(ids, r.JSON(t)["id"].(string))
	if h := health(); h != `{"status":"ok"}` {
		t.Fatalf("/healthz %s after freeing space", h)
	}
	if v := diskGauge(t, s, "eventd_disk_writes_refused"); v != "0" {
		t.Fatalf("eventd_disk_writes_refused %s after freeing space", v)
	}

	// Short again, crash, and a restart on a volume with no room at all:
	// it listens, serves every acknowledged event and refuses writes.
	fill(t, vol, diskMinFree/2)
	pollStatus(t, "POST /events on a short disk again", post, 507)
	s.Kill()
	fill(t, vol, 0)
	s.start()
	readAll()
	wantInsufficientStorage(t, post())
	if h := health(); h != `{"status":"degraded","reason":"disk"}` {
		t.Fatalf("/healthz %s after a restart on a full disk", h)
	}
	// The store is open read-only: admin reads work, admin changes get 507 too.
	if r := s.AdminDo(t, "GET", "/admin/v1/projects/"+project, nil); r.Status != 200 {
		t.Fatalf("admin read on a full disk: %d %s", r.Status, r.Body)
	}
	wantInsufficientStorage(t, s.AdminDo(t, "POST", "/admin/v1/projects", map[string]any{"name": "later"}))
	if v := diskGauge(t, s, "eventd_disk_writes_refused"); v != "1" {
		t.Fatalf("eventd_disk_writes_refused %s after a restart on a full disk", v)
	}
	// Not spinning: the old start retried Pebble's flush at once, forever,
	// logging a background error each time (thousands a second).
	readAll()
	if n := strings.Count(s.Logs(), "background error"); n > 20 {
		t.Fatalf("%d background errors logged after a restart on a full disk:\n%.3000s", n, s.Logs())
	}
	if strings.Contains(s.Logs(), "panic") {
		t.Fatalf("panic in the logs:\n%s", s.Logs())
	}

	// Deleting the ballast is the documented way out; with the filler gone
	// as well the server reopens the store for writing by itself (it
	// re-executes itself: new ports, since the test listens on port 0).
	listening := regexp.MustCompile(`msg="eventd listening" public=(\S+) admin=(\S+)`)
	starts := len(listening.FindAllStringSubmatch(s.Logs(), -1)) // the logs of every start so far
	if err := os.Remove(filepath.Join(s.Dir, "ballast")); err != nil {
		t.Fatal(err)
	}
	unfill(t, vol)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := listening.FindAllStringSubmatch(s.Logs(), -1)
		if len(m) > starts {
			// A new start: its ports may be ones another test's server
			// had in the other role (found when this test failed so).
			s.listening(m[len(m)-1][1], m[len(m)-1][2])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no restart for writing within 30 s of freeing space:\n%s", s.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	pollStatus(t, "POST /events after the restart for writing", post, 201)
	readAll()
	// The ballast comes back at that start, since there is room for it.
	if fi, err := os.Stat(filepath.Join(s.Dir, "ballast")); err != nil || fi.Size() != diskBallast {
		t.Fatalf("ballast after the restart: %v %v", fi, err)
	}
}

// TestHardeningDiskENOSPC fills the volume to the last byte with the guard
// off (--min-free-disk 0), so a WAL write meets ENOSPC: the request in
// flight gets 507, the process exits with status 3 and one log line instead
// of a panic trace, and a restart on the full volume serves every
// acknowledged event.
func TestHardeningDiskENOSPC(t *testing.T) {
	vol := mountTmpfs(t)
	s := &Server{t: t, Dir: filepath.Join(vol, "data"), Token: "adm_test_token_0123456789",
		Args: []string{"--ballast-size", "0", "--min-free-disk", "0", "--shards", "1"}}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill()
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", s.Logs())
		}
	})
	key := s.Key(t, s.Project(t, "enospc", "enterprise", nil), "secret", "live")
	event := map[string]any{"event": "signup", "properties": map[string]any{"pad": strings.Repeat("x", 2000)}}
	var ids []string
	for range 5 {
		r := Do(t, "POST", s.Public+"/events", key, event)
		wantStatus(t, r, 201)
		ids = append(ids, r.JSON(t)["id"].(string))
	}
	fill(t, vol, 0)
	refused := false
	for i := 0; i < 2000 && !refused; i++ { // bounded: each write is 2 KB and the WAL has at most a page left
		r := Do(t, "POST", s.Public+"/events", key, event)
		switch r.Status {
		case 201:
			ids = append(ids, r.JSON(t)["id"].(string))
		case 507:
			wantInsufficientStorage(t, r)
			refused = true
		default:
			t.Fatalf("write on a full volume: %d %s", r.Status, r.Body)
		}
	}
	if !refused {
		t.Fatal("no 507 after 2000 writes on a full volume")
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("eventd did not exit within 30 s of a fatal storage error")
	}
	s.cmd = nil
	var ee *exec.ExitError
	if s.mu.Lock(); !errors.As(s.exitErr, &ee) || ee.ExitCode() != 3 {
		t.Errorf("exit %v, want status 3", s.exitErr)
	}
	s.mu.Unlock()
	logs := s.Logs()
	if strings.Contains(logs, "panic") || strings.Contains(logs, "goroutine ") {
		t.Errorf("panic trace in the logs:\n%s", logs)
	}
	if n := strings.Count(logs, "storage failed; eventd stops"); n != 1 {
		t.Errorf("%d 'storage failed' lines, want 1", n)
	}

	s.start()
	for _, id := range ids {
		if r := Do(t, "GET", s.Public+"/events/"+id, key, nil); r.Status != 200 {
			t.Fatalf("acknowledged %s after a restart on a full volume: %d %s", id, r.Status, r.Body)
		}
	}
	wantInsufficientStorage(t, Do(t, "POST", s.Public+"/events", key, event))
}
