package storage

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// pointFilter is a tables' filter policy: Pebble's bloom filter of the keys
// of some families only, answering "may contain" for the others. Above the
// last level (newPointFilter) it holds the keys point look-ups read
// (records by id, idempotency records, config, cursors, goal markers,
// profiles, the derived log...), without the families that are only ever
// scanned: the name and time indexes (N, J, M), the visitor index (W, V),
// counters and rollup cells (C, U). Those are most of what a flush or
// compaction writes besides the records, and a filter of them was built
// for every table and never read (the filters were 3% of eventd's CPU in
// the batch scenario; docs/benchmarks.md, session 33).
//
// A table names its policy, and Pebble reads a table's filter only through
// the policy of that name (Options.Filters): tables written before keep
// their whole-key bloom filters, read through bloom.FilterPolicy, until
// compactions rewrite them. A family may join a policy's skip set under the
// same name (its keys are then answered "may contain" whatever a table's
// filter holds), but taking one out needs a new name: tables written
// before would answer "absent" for its keys, which their filters never
// held.
type pointFilter struct {
	bloom pebble.FilterPolicy
	name  string
	skip  *[256]bool // the key prefixes the filter leaves out
}

// filterBitsPerKey is the bloom filters' size: about 1% false positives.
const filterBitsPerKey = 10

// scanOnly marks the key prefixes no point look-up reads.
var scanOnly = prefixSet(prefixName, prefixDisplacedName, prefixDisplacedMark,
	prefixVisitor, prefixVisitorV1, prefixCounter, prefixRollup)

// notIdemSeek marks every key prefix but those of the idempotency layouts
// read by SeekPrefixGE (IdemLookup.seek): the last level's filter holds
// only theirs.
var notIdemSeek = func() *[256]bool {
	t := prefixSet(prefixIdemSlot, prefixIdemDay, prefixIdem)
	for i := range t {
		t[i] = !t[i]
	}
	return t
}()

func prefixSet(prefixes ...byte) *[256]bool {
	var t [256]bool
	for _, p := range prefixes {
		t[p] = true
	}
	return &t
}

func newPointFilter() pointFilter {
	return pointFilter{bloom.FilterPolicy(filterBitsPerKey), "eventd.point-bloom.v1", scanOnly}
}

// newIdemSeekFilter is the last level's: Pebble reads a filter there only
// for an iterator opened with UseL6Filters, which IdemLookup.seek's are.
func newIdemSeekFilter() pointFilter {
	return pointFilter{bloom.FilterPolicy(filterBitsPerKey), "eventd.idem-seek-bloom.v1", notIdemSeek}
}

// Name is the name tables record the policy under.
func (f pointFilter) Name() string { return f.name }

// MayContain answers true for the families left out, whose keys the filter
// does not hold, and asks the bloom filter for the others.
func (f pointFilter) MayContain(ft pebble.FilterType, filter, key []byte) bool {
	if len(key) > 0 && f.skip[key[0]] {
		return true
	}
	return f.bloom.MayContain(ft, filter, key)
}

// NewWriter returns a bloom filter writer that leaves out the families
// skipped.
func (f pointFilter) NewWriter(ft pebble.FilterType) pebble.FilterWriter {
	return pointWriter{f.bloom.NewWriter(ft), f.skip}
}

type pointWriter struct {
	w    pebble.FilterWriter
	skip *[256]bool
}

func (w pointWriter) AddKey(key []byte) {
	if len(key) == 0 || !w.skip[key[0]] {
		w.w.AddKey(key)
	}
}

func (w pointWriter) Finish(dst []byte) []byte { return w.w.Finish(dst) }

// setFilters gives every level but the last the point filter, the last
// one the filter of the idempotency layouts read by seeks, and keeps the
// whole-key bloom filter of the tables written before them readable.
//
// Pebble reads a last-level filter only for an iterator opened with
// UseL6Filters (file_cache.go: its filters are as large as the level),
// never for a Get. Before, every last-level table had a whole-key filter
// that nothing read, built by every compaction into the last level and by
// the visitor days' ingested tables; the idempotency look-ups that miss
// (most: a new messageId) read an index and a data block there instead.
func setFilters(opts *pebble.Options) {
	f, last := newPointFilter(), newIdemSeekFilter()
	old := bloom.FilterPolicy(filterBitsPerKey)
	opts.Filters = map[string]pebble.FilterPolicy{f.Name(): f, last.Name(): last, old.Name(): old}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = f
	}
	opts.Levels[len(opts.Levels)-1].FilterPolicy = last
}
