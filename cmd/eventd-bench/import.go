package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/eventd/eventd/bench"
)

// The import scenario: one POST /admin/v1/projects/{id}/import per round,
// NDJSON of the single scenario's event, each line with its own idempotency
// key (an import that can safely be run again), against raw Pebble commits
// of the same records in chunks of the import's size by one committer.
const (
	// importChunk is the import's commit size (engine: 2,000 lines).
	importChunk = 2000
	// importSizing is the rate a round's line count is sized for, so a
	// round lasts about --duration at the target rate.
	importSizing = 200_000
	// minImportRate is issue 12's import target.
	minImportRate = 200_000
)

// importBody is n NDJSON lines of tmpl numbered from base, each with the
// idempotency key imp_<number>.
func importBody(tmpl *bench.Template, base uint64, n int) []byte {
	var b, ev []byte
	for i := range uint64(n) {
		ev = tmpl.AppendTo(ev[:0], base+i)
		b = append(b, `{"idempotency_key":"imp_`...)
		b = strconv.AppendUint(b, base+i, 10)
		b = append(b, `",`...)
		b = append(b, ev[1:]...) // the template's object without its "{"
		b = append(b, '\n')
	}
	return b
}

func buildImport(e *env) *plan {
	var project string
	p := &plan{needsAdmin: true, needsEventd: true}
	p.setup = func(ctx context.Context, _ *progress) error {
		pr, err := e.admin.CreateProject(ctx, "import-bench", "enterprise", &bench.BenchLimits)
		if err != nil {
			return err
		}
		project = pr.ID
		return nil
	}
	p.eventd = subject{name: "eventd", unit: bench.UnitEvents, eventsPer: importChunk, server: true,
		run: func(ctx context.Context, d time.Duration, _ *progress) (*bench.Result, error) {
			n := max(int(d.Seconds()*importSizing), importChunk)
			body := importBody(e.tmpl, e.seqBase(), n)
			return postImport(ctx, e.admin, project, body, n)
		}}
	p.ceilings = []subject{pebbleSubject(e, "pebble", 1, importChunk, bench.UnitEvents)}
	p.judge = func(sc *bench.ScenarioResult) {
		rate := sc.Eventd.Rate()
		sc.Check("import with idempotency keys", fmt.Sprintf("≥ %s", bench.FormatRate(minImportRate, bench.UnitEvents)),
			bench.FormatRate(rate, bench.UnitEvents), rate >= minImportRate)
		sc.Note("raw Pebble Sync commits of %d records by one committer: eventd reaches %.0f%% of them", importChunk, 100*bench.Ratio(sc.Eventd, sc.Ceilings[0]))
	}
	return p
}

// postImport sends one import and reads its answer into a Result of one
// request whose events are the lines accepted.
func postImport(ctx context.Context, a *bench.Admin, project string, body []byte, lines int) (*bench.Result, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", a.URL+"/admin/v1/projects/"+project+"/import?environment=live", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	elapsed := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	var out struct {
		Lines, Accepted, Rejected int
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Lines != lines {
		return nil, fmt.Errorf("import: %s %.200s", resp.Status, b)
	}
	res := &bench.Result{Mode: bench.ClosedLoop, Conns: 1, Elapsed: elapsed, Requests: 1, OK: 1, Expect: http.StatusOK,
		Events: uint64(out.Accepted), RejectedEvents: uint64(out.Rejected), BytesSent: uint64(len(body)),
		Statuses: map[int]uint64{resp.StatusCode: 1}, Started: start}
	res.Latency.Record(elapsed)
	res.Service.Record(elapsed)
	return res, nil
}
