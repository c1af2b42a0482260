package test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// importN is the size of the import round trip the issue asks for.
const importN = 1_000_000

type importResult struct {
	Lines, Accepted, Duplicates, Rejected int
	Errors                                []struct {
		Line    int
		Error   string
		Details map[string]string
	}
}

func (s *Server) importBody(t *testing.T, project, env string, body io.Reader, gz bool) importResult {
	t.Helper()
	req, err := http.NewRequest("POST", s.Admin+"/admin/v1/projects/"+project+"/import?environment="+env, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("import: %d %s", resp.StatusCode, b)
	}
	var res importResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// generated streams n events with idempotency keys, spread over 30 days.
func generated(n int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		for i := 0; i < n; i++ {
			ts := time.UnixMilli(base + int64(i)*2_592_000_000/int64(n)).UTC().Format("2006-01-02T15:04:05.000Z")
			fmt.Fprintf(bw, `{"event":"e%d","visitor_id":"v%d","properties":{"n":%d,"amount":%d.5},"timestamp":%q,"idempotency_key":"imp-%d"}`+"\n",
				i%7, i%1000, i, i%100+1, ts, i)
		}
		_ = bw.Flush()
		_ = pw.Close()
	}()
	return pr
}

func TestImportExportRoundTrip(t *testing.T) {
	s := StartFast(t) // a million events: the race detector would make this a ten-minute test
	p := s.Project(t, "imp", "", nil)
	n := importN
	start := time.Now()
	res := s.importBody(t, p, "live", generated(n), false)
	t.Logf("imported %d events in %v (%.0f events/s)", n, time.Since(start), float64(n)/time.Since(start).Seconds())
	if res.Lines != n || res.Accepted != n || res.Rejected != 0 || res.Duplicates != 0 {
		t.Fatalf("import result %+v", res)
	}

	// Export and check every event against what was generated.
	resp, err := http.Get(s.Admin + "/admin/v1/projects/" + p + "/export?environment=live")
	if err == nil && resp.StatusCode == 401 {
		resp.Body.Close()
		req, _ := http.NewRequest("GET", s.Admin+"/admin/v1/projects/"+p+"/export?environment=live", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err = http.DefaultClient.Do(req)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	exportFile := filepath.Join(t.TempDir(), "export.ndjson")
	f, err := os.Create(exportFile)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, n)
	sc := bufio.NewScanner(io.TeeReader(resp.Body, f))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	lines := 0
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var prevTS string
	for sc.Scan() {
		var e struct {
			ID         string
			Event      string
			VisitorID  string `json:"visitor_id"`
			Properties struct {
				N      int
				Amount float64
			}
			Timestamp string
			CreatedAt string `json:"created_at"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("export line %d: %v", lines, err)
		}
		i := e.Properties.N
		wantTS := time.UnixMilli(base + int64(i)*2_592_000_000/int64(n)).UTC().Format("2006-01-02T15:04:05.000Z")
		if i < 0 || i >= n || seen[i] || e.Event != fmt.Sprintf("e%d", i%7) || e.VisitorID != fmt.Sprintf("v%d", i%1000) ||
			e.Properties.Amount != float64(i%100+1)+0.5 || e.Timestamp != wantTS || !strings.HasPrefix(e.ID, "evt_") || e.CreatedAt == "" {
			t.Fatalf("export line %d does not match generated event %d: %s", lines, i, sc.Bytes())
		}
		if e.Timestamp < prevTS {
			t.Fatalf("export not in timestamp order at line %d", lines)
		}
		prevTS = e.Timestamp
		seen[i] = true
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if lines != n {
		t.Fatalf("exported %d events, want %d", lines, n)
	}

	// Re-running the original import adds nothing (idempotency keys) ...
	if res := s.importBody(t, p, "live", generated(n), false); res.Accepted != 0 || res.Duplicates != n {
		t.Fatalf("re-run: %+v", res)
	}
	// ... and importing the export adds nothing either (ids kept).
	ef, err := os.Open(exportFile)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	if res := s.importBody(t, p, "live", ef, false); res.Accepted != 0 || res.Duplicates != n || res.Rejected != 0 {
		t.Fatalf("re-import of the export: %+v", res)
	}
	key := s.Key(t, p, "secret", "live")
	r := Do(t, "GET", s.Public+"/events?limit=1", key, nil)
	wantStatus(t, r, 200)
	if total := r.JSON(t)["pagination"].(map[string]any)["total"].(float64); int(total) != n {
		t.Fatalf("total %v after re-imports, want %d", total, n)
	}
}

func TestImportRejectsAndGzip(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "imp", "", nil)
	body := strings.Join([]string{
		`{"event":"ok_one","visitor_id":"v1"}`,
		`{"event":"bad name"}`,
		``,
		`not json`,
		`{"event":"ok_two","properties":{"amount":-1}}`,
		`{"event":"ok_three","id":"evt_nope"}`,
		`{"event":"ok_four","idempotency_key":"k","properties":{"a":1}}`,
		`{"event":"ok_four","idempotency_key":"k","properties":{"a":2}}`,
	}, "\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(body))
	_ = zw.Close()
	res := s.importBody(t, p, "test", &gz, true)
	if res.Lines != 7 || res.Accepted != 2 || res.Rejected != 5 {
		t.Fatalf("result %+v", res)
	}
	want := map[int]string{2: "bad_request", 4: "bad_request", 5: "validation_error", 6: "bad_request", 8: "idempotency_conflict"}
	for _, e := range res.Errors {
		if want[e.Line] != e.Error {
			t.Fatalf("line %d: error %q, want %q (all: %+v)", e.Line, e.Error, want[e.Line], res.Errors)
		}
		delete(want, e.Line)
	}
	if len(want) != 0 {
		t.Fatalf("missing rejects for lines %v", want)
	}
	// The test environment got the events, live did not.
	live := Do(t, "GET", s.Public+"/events", s.Key(t, p, "secret", "live"), nil)
	if total := live.JSON(t)["pagination"].(map[string]any)["total"].(float64); total != 0 {
		t.Fatalf("live total %v, want 0", total)
	}
	if r := s.AdminDo(t, "POST", "/admin/v1/projects/nope/import", "{}"); r.Status != 404 {
		t.Fatalf("unknown project: %d", r.Status)
	}
}

func TestBackupDuringIngestRestores(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "bk", "", streamLimits)
	key := s.Key(t, p, "secret", "live")

	var mu sync.Mutex
	type ack struct {
		id string
		at time.Time
	}
	var acks []ack
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "tick"})
				if r.Status != 201 {
					t.Errorf("post: %d %s", r.Status, r.Body)
					return
				}
				var out struct{ ID string }
				_ = json.Unmarshal(r.Body, &out)
				mu.Lock()
				acks = append(acks, ack{out.ID, time.Now()})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	dir := filepath.Join(t.TempDir(), "backup")
	began := time.Now()
	cmd := exec.Command(binary, "backup", "--admin-url", s.Admin, "--admin-token", s.Token, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("eventd backup: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	// A second backup into the same directory is refused.
	if r := s.AdminDo(t, "POST", "/admin/v1/backup", map[string]string{"dir": dir}); r.Status != 409 {
		t.Fatalf("backup into an existing dir: %d %s", r.Status, r.Body)
	}
	if r := s.AdminDo(t, "POST", "/admin/v1/backup", map[string]string{"dir": "relative/path"}); r.Status != 400 {
		t.Fatalf("relative backup dir: %d %s", r.Status, r.Body)
	}

	// Restore into a fresh data dir and serve from it.
	data := filepath.Join(t.TempDir(), "restored")
	out, err := exec.Command(binary, "restore", "--data", data, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("eventd restore: %v\n%s", err, out)
	}
	if out, err := exec.Command(binary, "restore", "--data", data, dir).CombinedOutput(); err == nil {
		t.Fatalf("restore over an existing store succeeded without --force:\n%s", out)
	}
	r2 := &Server{t: t, Dir: data, Token: s.Token}
	r2.start()
	t.Cleanup(func() {
		if r2.cmd != nil {
			r2.Kill()
		}
	})
	checked := 0
	for _, a := range acks {
		if !a.at.Before(began) {
			continue
		}
		checked++
		if r := Do(t, "GET", r2.Public+"/events/"+a.id, key, nil); r.Status != 200 {
			t.Fatalf("event %s acknowledged before the backup began is missing after restore: %d", a.id, r.Status)
		}
	}
	if checked == 0 {
		t.Fatal("no event was acknowledged before the backup began")
	}
	t.Logf("%d events acknowledged before the backup, all restored", checked)
}
