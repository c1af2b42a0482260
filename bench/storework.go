package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// StoreWork is the background work eventd's store did while a run went on:
// the compactions and visitor-memory splits of earlier runs land in
// whichever run comes next, so a scenario whose subjects share one server
// reports them beside each subject's rate (docs/benchmarks.md, session 24).
type StoreWork struct {
	Known bool // both readings of /metrics succeeded
	// CompactedBytes is what Pebble's compactions wrote.
	CompactedBytes float64
	// VisitorSplits counts runs in which the visitor memory shrank: a day
	// past --visitor-memory was written to the store, seconds of CPU in one
	// go. A run counts one however many happened in it.
	VisitorSplits int
}

// StoreReading is one reading of the metrics StoreWork is made from.
type StoreReading struct {
	ok             bool
	compacted      float64
	visitorEntries float64
}

// Metric names read from eventd's /metrics.
const (
	metricCompacted      = "eventd_pebble_compaction_bytes_written_total"
	metricVisitorEntries = "eventd_visitor_index_memory_entries"
)

// ReadStore takes a StoreReading from a /metrics body (Prometheus text); it
// is not ok when either metric is missing.
func ReadStore(metrics []byte) StoreReading {
	var r StoreReading
	var seen int
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case metricCompacted:
			dst = &r.compacted
		case metricVisitorEntries:
			dst = &r.visitorEntries
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return StoreReading{}
		}
		*dst = v
		seen++
	}
	r.ok = seen == 2
	return r
}

// StoreWorkBetween is the work done between two readings.
func StoreWorkBetween(before, after StoreReading) StoreWork {
	if !before.ok || !after.ok {
		return StoreWork{}
	}
	w := StoreWork{Known: true, CompactedBytes: max(0, after.compacted-before.compacted)}
	if after.visitorEntries < before.visitorEntries {
		w.VisitorSplits = 1
	}
	return w
}

// add sums two runs' work.
func (w *StoreWork) add(o StoreWork) {
	if !o.Known {
		return
	}
	w.Known = true
	w.CompactedBytes += o.CompactedBytes
	w.VisitorSplits += o.VisitorSplits
}

// StoreWorkNote lists the store's work during each series' rounds, or
// returns "" when fewer than two series know theirs (one subject alone
// pays for its own work, which its rate already shows).
func StoreWorkNote(series []*Series) string {
	var parts []string
	for _, s := range series {
		w := s.Total().Store
		if !w.Known {
			continue
		}
		part := fmt.Sprintf("%s %.0f MiB compacted", s.Name, w.CompactedBytes/(1<<20))
		switch w.VisitorSplits {
		case 0:
		case 1:
			part += ", a visitor-memory split"
		default:
			part += fmt.Sprintf(", %d visitor-memory splits", w.VisitorSplits)
		}
		parts = append(parts, part)
	}
	if len(parts) < 2 {
		return ""
	}
	return "store work during each subject's rounds (left by whatever ran before as often as by the subject): " + strings.Join(parts, "; ")
}
