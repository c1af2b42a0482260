package storage

import (
	"bytes"
	"cmp"
	"slices"
)

// The late writer's two orders of a cell's entries (latewrite.go): the M
// keys' (dataset, time, id) and the J keys' (dataset, name, time, id).
// Compared entry by entry they were two full sorts of 40-byte entries,
// half of the writer's CPU; a cell's times lie within its second and a
// commit's ids grow, so counting sorts by millisecond, dataset and name
// do most of the work in passes over it (BenchmarkLateSorter: a third of
// the time).

// byTime is the M keys' order.
func byTime(a, b lateEntry) int {
	if a.ds != b.ds {
		return cmp.Compare(a.ds, b.ds)
	}
	if a.ts != b.ts {
		return cmp.Compare(a.ts, b.ts)
	}
	return bytes.Compare(a.id[:], b.id[:])
}

// byDatasetID orders the entries of one millisecond.
func byDatasetID(a, b lateEntry) int {
	if a.ds != b.ds {
		return cmp.Compare(a.ds, b.ds)
	}
	return bytes.Compare(a.id[:], b.id[:])
}

// byName is the J keys' order, the names ranked by rank.
func byName(rank []uint32) func(a, b lateEntry) int {
	return func(a, b lateEntry) int {
		if a.ds != b.ds {
			return cmp.Compare(a.ds, b.ds)
		}
		if a.name != b.name {
			return cmp.Compare(rank[a.name], rank[b.name])
		}
		return byTime(a, b)
	}
}

// maxNameBuckets bounds the J order's counting sort: datasets times names.
const maxNameBuckets = 1 << 16

// lateSorter sorts a cell's entries, in two buffers it owns: a counting
// sort reads one and writes the other.
type lateSorter struct {
	bufs   [2][]lateEntry
	cur    int // the buffer holding the entries
	count  []int
	dsList []uint32
	dsAt   map[uint32]int
}

// load copies the entries of a cell that are not removed into s.
func (s *lateSorter) load(entries []lateEntry) {
	es := slices.Grow(s.bufs[s.cur][:0], len(entries))
	for i := range entries {
		if entries[i].flags&lateRemoved == 0 {
			es = append(es, entries[i])
		}
	}
	s.bufs[s.cur] = es
}

// sortByTime sorts the entries, whose times are in [base,
// base+lateCellMs), into the M keys' order and returns them.
func (s *lateSorter) sortByTime(base int64) []lateEntry {
	es := s.bufs[s.cur]
	for i := range es {
		if off := es[i].ts - base; off < 0 || off >= lateCellMs {
			slices.SortFunc(es, byTime)
			return es
		}
	}
	out := s.countSort(lateCellMs, func(e *lateEntry) int { return int(e.ts - base) })
	// Within a millisecond, by dataset and id: a commit's ids grow, so a
	// run is mostly in order already.
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].ts == out[i].ts {
			j++
		}
		if run := out[i:j]; len(run) > 1 && !slices.IsSortedFunc(run, byDatasetID) {
			slices.SortFunc(run, byDatasetID)
		}
		i = j
	}
	if s.datasets(out) == 1 {
		return out
	}
	// The dataset first, the millisecond order kept within each.
	return s.countSort(len(s.dsList), func(e *lateEntry) int { return s.dsAt[e.ds] })
}

// sortByName sorts the entries, in the M keys' order, into the J keys'
// order, the names ranked by rank, and returns them.
func (s *lateSorter) sortByName(rank []uint32) []lateEntry {
	es := s.bufs[s.cur]
	nds := s.datasets(es)
	if nds*len(rank) > maxNameBuckets {
		slices.SortFunc(es, byName(rank))
		return es
	}
	if nds <= 1 {
		return s.countSort(len(rank), func(e *lateEntry) int { return int(rank[e.name]) })
	}
	return s.countSort(nds*len(rank), func(e *lateEntry) int { return s.dsAt[e.ds]*len(rank) + int(rank[e.name]) })
}

// datasets notes the datasets of es, in order, in dsList and dsAt, and
// returns how many there are.
func (s *lateSorter) datasets(es []lateEntry) int {
	s.dsList = s.dsList[:0]
	if s.dsAt == nil {
		s.dsAt = map[uint32]int{}
	}
	clear(s.dsAt)
	for i := range es {
		// Entries of one dataset follow each other in a commit.
		if i > 0 && es[i].ds == es[i-1].ds {
			continue
		}
		if _, ok := s.dsAt[es[i].ds]; !ok {
			s.dsAt[es[i].ds] = 0
			s.dsList = append(s.dsList, es[i].ds)
		}
	}
	slices.Sort(s.dsList)
	for i, ds := range s.dsList {
		s.dsAt[ds] = i
	}
	return len(s.dsList)
}

// countSort sorts the entries stably by bucket (0 to n-1) into the other
// buffer, which then holds them, and returns them.
func (s *lateSorter) countSort(n int, bucket func(*lateEntry) int) []lateEntry {
	in := s.bufs[s.cur]
	s.count = slices.Grow(s.count[:0], n+1)[:n+1]
	clear(s.count)
	for i := range in {
		s.count[bucket(&in[i])+1]++
	}
	for i := 1; i <= n; i++ {
		s.count[i] += s.count[i-1]
	}
	s.cur = 1 - s.cur
	out := slices.Grow(s.bufs[s.cur][:0], len(in))[:len(in)]
	for i := range in {
		b := bucket(&in[i])
		out[s.count[b]] = in[i]
		s.count[b]++
	}
	s.bufs[s.cur] = out
	return out
}
