package bench

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// A store that has taken millions of events is slower than a fresh one
// (deeper LSM, more compaction debt, larger indexes), so the ingest
// scenarios run twice: on the store as the default set leaves it ("fresh"),
// then again after a bulk load of N more events ("loaded"), with the
// ceilings' store loaded alike. These are the pieces that compare the two.

// Phases of a scenario run.
const (
	PhaseFresh  = "fresh"
	PhaseLoaded = "loaded"
)

// LoadedName is the name a scenario's loaded run carries in the table and
// the JSON, e.g. "single (loaded 5M)".
func LoadedName(base string, events uint64) string {
	return fmt.Sprintf("%s (loaded %s)", base, ShortCount(events))
}

// ShortCount prints 5000000 as "5M", 2500000 as "2.5M", 20000 as "20k"; an
// exact figure below a thousand or where a short form would round.
func ShortCount(n uint64) string {
	for _, u := range []struct {
		div uint64
		sfx string
	}{{1_000_000_000, "G"}, {1_000_000, "M"}, {1_000, "k"}} {
		if n >= u.div && (n*10)%u.div == 0 {
			return strconv.FormatFloat(float64(n)/float64(u.div), 'f', -1, 64) + u.sfx
		}
	}
	return groupThousands(int64(n))
}

// CPUPer is a series' server CPU per successful request (per stored event
// for a series counted in events); false when the server's CPU was not read
// or nothing succeeded.
func CPUPer(s *Series) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	t := s.Total()
	n := t.OK
	if s.Unit == UnitEvents {
		n = t.Events
	}
	if !t.HasServerCPU || n == 0 || t.ServerCPU <= 0 {
		return 0, false
	}
	return t.ServerCPU / time.Duration(n), true
}

// CPURatio is eventd's server CPU per durable event over the no-op's CPU per
// request (issue 12: at most 2.5); false when either side is unknown.
func CPURatio(eventd, noop *Series) (ratio float64, ev, np time.Duration, ok bool) {
	ev, ok1 := CPUPer(eventd)
	np, ok2 := CPUPer(noop)
	if !ok1 || !ok2 {
		return 0, ev, np, false
	}
	return float64(ev) / float64(np), ev, np, true
}

// StoreState is what a store looked like when the loaded phase began.
type StoreState struct {
	// DiskBytes is the size of the store's directory.
	DiskBytes int64 `json:"disk_bytes"`
	// The LSM's state, where the store can be asked (the in-process Pebble
	// ceiling; eventd does not export Pebble's metrics).
	HasLSM         bool   `json:"has_lsm"`
	L0Tables       int64  `json:"l0_tables,omitempty"`
	L0Sublevels    int32  `json:"l0_sublevels,omitempty"`
	Compactions    int64  `json:"compactions_in_progress,omitempty"`
	CompactionDebt uint64 `json:"compaction_debt_bytes,omitempty"`
}

// String sums the state up for the report.
func (s StoreState) String() string {
	if s.DiskBytes == 0 && !s.HasLSM {
		return "store size unknown (a server the bench did not start)"
	}
	out := FormatBytes(float64(s.DiskBytes)) + " on disk"
	if s.HasLSM {
		out += fmt.Sprintf(", L0 %d tables in %d sublevels, %d compactions running, compaction debt %s",
			s.L0Tables, s.L0Sublevels, s.Compactions, FormatBytes(float64(s.CompactionDebt)))
	}
	return out
}

// DirSize adds up the sizes of the regular files under dir (0 when it
// cannot be read).
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file compacted away under us
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// StoreLoad is one store's bulk load before the loaded phase.
type StoreLoad struct {
	Subject  string     `json:"subject"` // "eventd" or "pebble"
	Events   uint64     `json:"events"`
	ElapsedS float64    `json:"elapsed_s"`
	Rate     float64    `json:"events_per_s"`
	How      string     `json:"how"`
	State    StoreState `json:"state_after"`
	// CompactS is how long the bench then took to compact the store down
	// (the in-process ceiling only; eventd is not waited for: its
	// compaction debt is the steady state being measured). State is read
	// after it.
	CompactS float64 `json:"compact_s,omitempty"`
}

// LoadedRow compares one scenario's fresh and loaded runs.
type LoadedRow struct {
	Scenario string  `json:"scenario"`
	Unit     string  `json:"unit"`
	Fresh    float64 `json:"fresh"`
	Loaded   float64 `json:"loaded"`
	// Slowdown is loaded over fresh (1: no change).
	LoadedOverFresh float64 `json:"loaded_over_fresh"`
	// Ceiling is the first ceiling's name; the ratios are to it.
	Ceiling     string  `json:"ceiling"`
	FreshRatio  float64 `json:"fresh_ratio"`
	LoadedRatio float64 `json:"loaded_ratio"`
	FreshP99Us  float64 `json:"fresh_p99_us"`
	LoadedP99Us float64 `json:"loaded_p99_us"`
}

// CompareLoaded pairs a scenario's fresh and loaded results.
func CompareLoaded(fresh, loaded *ScenarioResult) LoadedRow {
	row := LoadedRow{Scenario: fresh.Name}
	if fresh.Eventd != nil {
		row.Unit = fresh.Eventd.Unit
		row.Fresh = fresh.Eventd.Rate()
		row.FreshP99Us = float64(fresh.Eventd.Total().Latency.Percentile(99)) / 1e3
	}
	if loaded.Eventd != nil {
		row.Loaded = loaded.Eventd.Rate()
		row.LoadedP99Us = float64(loaded.Eventd.Total().Latency.Percentile(99)) / 1e3
	}
	if row.Fresh > 0 {
		row.LoadedOverFresh = row.Loaded / row.Fresh
	}
	if len(fresh.Ceilings) > 0 {
		row.Ceiling = fresh.Ceilings[0].Name
		row.FreshRatio = Ratio(fresh.Eventd, fresh.Ceilings[0])
	}
	if len(loaded.Ceilings) > 0 {
		row.LoadedRatio = Ratio(loaded.Eventd, loaded.Ceilings[0])
	}
	return row
}

// LoadedPhase is the loaded phase in bench-results.json.
type LoadedPhase struct {
	// Events is how many events each store took before the loaded runs,
	// on top of what the fresh runs had written.
	Events  uint64      `json:"events"`
	Loads   []StoreLoad `json:"loads"`
	Rows    []LoadedRow `json:"rows"`
	Restart *Restart    `json:"restart,omitempty"`
}

// MaxRestart is issue 12's bound on a restart after kill -9 of a loaded
// store: the derived data rebuilt and the server healthy.
const MaxRestart = 5 * time.Second

// Restart is eventd killed with SIGKILL right after a burst of writes, then
// started again on the same store.
type Restart struct {
	// Seconds from exec to a healthy /healthz.
	Seconds float64 `json:"seconds"`
	// TotalBefore is GET /events' total read just before the kill,
	// TotalAfter the same after the restart: exact when equal.
	TotalBefore int64 `json:"total_before"`
	TotalAfter  int64 `json:"total_after"`
	// Replayed is the number of commits the server folded in again from its
	// derived log (its "derived log replayed" line), -1 when not logged.
	Replayed int `json:"replayed"`
	// IdemKeys and IdemTook are the idempotency keys the server's filter
	// was rebuilt with and how long that took (its "idempotency filter
	// rebuilt in memory" line): keyed writes wait for it, other requests
	// do not. IdemTook is "" when not logged.
	IdemKeys int64  `json:"idem_keys,omitempty"`
	IdemTook string `json:"idem_took,omitempty"`
	// DiskBytes is the store's size.
	DiskBytes int64 `json:"disk_bytes"`
}

// WriteRestart prints the restart line with its goal.
func WriteRestart(w io.Writer, r *Restart) {
	if r == nil {
		return
	}
	verdict := "met   "
	if r.Seconds >= MaxRestart.Seconds() || r.TotalBefore != r.TotalAfter {
		verdict = "MISSED"
	}
	exact := "exact"
	if r.TotalBefore != r.TotalAfter {
		exact = "NOT exact"
	}
	idem := ""
	if r.IdemTook != "" {
		idem = fmt.Sprintf("; idempotency filter: %s keys rebuilt in %s (keyed writes wait for it)", groupThousands(r.IdemKeys), r.IdemTook)
	}
	fmt.Fprintf(w, "\nrestart after kill -9 (store of %s):\n  %s healthy %.2f s after exec (goal < %v), list total %s before the kill and %s after (%s); %d commits replayed from the derived log%s\n",
		FormatBytes(float64(r.DiskBytes)), verdict, r.Seconds, MaxRestart, groupThousands(r.TotalBefore), groupThousands(r.TotalAfter), exact, r.Replayed, idem)
}

// WriteLoadedTable prints the fresh and loaded figures side by side.
func WriteLoadedTable(w io.Writer, p *LoadedPhase) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nfresh vs loaded (each store took %s more events after the fresh runs):\n", groupThousands(int64(p.Events)))
	for _, l := range p.Loads {
		q := ""
		if l.CompactS > 0 {
			q = fmt.Sprintf(", then %.1f s to compact it", l.CompactS)
		}
		fmt.Fprintf(w, "  %s: %s events in %.1f s (%s, %s)%s; then %s\n", l.Subject, groupThousands(int64(l.Events)), l.ElapsedS,
			FormatRate(l.Rate, UnitEvents), l.How, q, l.State)
	}
	nameW, ceilW := len("scenario"), len("ceiling")
	for _, r := range p.Rows {
		nameW, ceilW = max(nameW, len(r.Scenario)), max(ceilW, len(r.Ceiling))
	}
	left := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-len(s))) }
	// AlignRight pads every cell, the first too: the rows start indented.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tfresh\tloaded\tloaded/fresh\t%s\tratio fresh\tratio loaded\tp99 fresh\tp99 loaded\t\n",
		left("scenario", nameW), left("ceiling", ceilW))
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%.2f\t%.2f\t%s\t%s\t\n", left(r.Scenario, nameW),
			FormatRate(r.Fresh, r.Unit), FormatRate(r.Loaded, r.Unit), r.LoadedOverFresh, left(r.Ceiling, ceilW),
			r.FreshRatio, r.LoadedRatio, FormatDuration(time.Duration(r.FreshP99Us*1e3)), FormatDuration(time.Duration(r.LoadedP99Us*1e3)))
	}
	tw.Flush()
}
