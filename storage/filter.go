package storage

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// pointFilter is the tables' filter policy: Pebble's bloom filter of the
// keys that point look-ups read (records by id, idempotency records,
// config, cursors, goal markers, profiles, the derived log...), without the
// families that are only ever scanned: the name and time indexes (N, J,
// M), the visitor index (W, V), counters and rollup cells (C, U). Those are
// most of what a flush or compaction writes besides the records, and a
// filter of them was built for every table and never read (the filters
// were 3% of eventd's CPU in the batch scenario; docs/benchmarks.md,
// session 33).
//
// A table names its policy, and Pebble reads a table's filter only through
// the policy of that name (Options.Filters): tables written before keep
// their whole-key bloom filters, read through bloom.FilterPolicy, until
// compactions rewrite them. A family may join scanOnly under the same name
// (its keys are then answered "may contain" whatever a table's filter
// holds), but taking one out needs a new name: tables written before would
// answer "absent" for its keys, which their filters never held.
type pointFilter struct{ bloom pebble.FilterPolicy }

// filterBitsPerKey is the bloom filters' size: about 1% false positives.
const filterBitsPerKey = 10

// scanOnly marks the key prefixes no point look-up reads.
var scanOnly = func() (t [256]bool) {
	for _, p := range []byte{prefixName, prefixDisplacedName, prefixDisplacedMark,
		prefixVisitor, prefixVisitorV1, prefixCounter, prefixRollup} {
		t[p] = true
	}
	return t
}()

func newPointFilter() pointFilter { return pointFilter{bloom.FilterPolicy(filterBitsPerKey)} }

// Name is the name tables record the policy under.
func (pointFilter) Name() string { return "eventd.point-bloom.v1" }

// MayContain answers true for the scanned families, whose keys the filter
// does not hold, and asks the bloom filter for the others.
func (f pointFilter) MayContain(ft pebble.FilterType, filter, key []byte) bool {
	if len(key) > 0 && scanOnly[key[0]] {
		return true
	}
	return f.bloom.MayContain(ft, filter, key)
}

// NewWriter returns a bloom filter writer that skips the scanned families.
func (f pointFilter) NewWriter(ft pebble.FilterType) pebble.FilterWriter {
	return pointWriter{f.bloom.NewWriter(ft)}
}

type pointWriter struct{ w pebble.FilterWriter }

func (w pointWriter) AddKey(key []byte) {
	if len(key) == 0 || !scanOnly[key[0]] {
		w.w.AddKey(key)
	}
}

func (w pointWriter) Finish(dst []byte) []byte { return w.w.Finish(dst) }

// setFilters gives every level but the last the point filter, and keeps
// the whole-key bloom filter of the tables written before it readable.
//
// The last level's tables get none: Pebble reads a filter there only for an
// iterator opened with UseL6Filters (file_cache.go: its filters are as large
// as the level), never for a Get, and eventd opens none so. Its filters were
// built by every compaction into the last level, and by the visitor days'
// tables ingested there, and never read.
func setFilters(opts *pebble.Options) {
	f := newPointFilter()
	old := bloom.FilterPolicy(filterBitsPerKey)
	opts.Filters = map[string]pebble.FilterPolicy{f.Name(): f, old.Name(): old}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = f
	}
	opts.Levels[len(opts.Levels)-1].FilterPolicy = pebble.NoFilterPolicy
}
