package storage

import (
	"bytes"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// tableSplits is Pebble's SpanPolicyFunc: it ends every flushed or
// compacted table where the key's first byte changes and, within the
// records (S), the displaced events' keys (Z) and the name index (N), where
// a busy dataset's or a busy dataset and event name's keys begin and end.
//
// Those keys grow at their ends, but only within their dataset (S, Z) or
// their dataset and name (N). A flushed table that holds several of them
// overlaps each one's last table below, so Pebble merged it with all of
// them; a flushed table of one of them overlaps nothing below and is moved
// down whole (session 18). With eight event names this took an event's
// storage CPU from 4.3-4.4 µs to 3.6-3.8 (docs/benchmarks.md, session 19).
// Ending tables at every name would also write a tiny table per rare name
// per flush, so only groups with at least 1/minShareInv of the recent
// events get their own tables; the others share tables between the busy
// ones.
//
// The shares come from the derived checkpoints (observe), which already
// hold each interval's counts per dataset and name.
type tableSplits struct {
	ranges atomic.Pointer[[]keyRange] // sorted, disjoint; read by Pebble's goroutines
	// vol is each group's event count, halved every splitHalfLife; written by
	// observe alone, which the derived checkpoints call one at a time.
	vol  map[splitGroup]float64
	last time.Time
}

// splitGroup is a dataset (name "") or one event name of a dataset.
type splitGroup struct {
	ds   uint32
	name string
}

// keyRange is [lo, hi).
type keyRange struct{ lo, hi []byte }

// minShareInv: a group gets tables of its own from 1/32 of the events on,
// so at most 32 per prefix per flush, each at least 1/32 of the flushed
// prefix (a flush holds a memtable, 64 MiB, whatever the rate).
const minShareInv = 32

// splitHalfLife is how fast a group's share follows the traffic.
const splitHalfLife = 30 * time.Second

func newTableSplits() *tableSplits {
	t := &tableSplits{vol: map[splitGroup]float64{}}
	t.ranges.Store(new([]keyRange))
	return t
}

// policy is the SpanPolicyFunc.
func (t *tableSplits) policy(start []byte) (pebble.SpanPolicy, []byte, error) {
	if len(start) == 0 || start[0] == 0xff {
		return pebble.SpanPolicy{}, nil, nil
	}
	end := []byte{start[0] + 1}
	rs := *t.ranges.Load()
	i := sort.Search(len(rs), func(i int) bool { return bytes.Compare(rs[i].hi, start) > 0 })
	if i < len(rs) {
		if bytes.Compare(rs[i].lo, start) <= 0 {
			return pebble.SpanPolicy{}, rs[i].hi, nil
		}
		if bytes.Compare(rs[i].lo, end) < 0 {
			end = rs[i].lo
		}
	}
	return pebble.SpanPolicy{}, end, nil
}

// observe folds a checkpoint's overlay into the groups' volumes at time now
// and publishes the busy groups' key ranges.
func (t *tableSplits) observe(o *overlay, now time.Time) {
	decay := 1.0
	if !t.last.IsZero() {
		decay = math.Exp2(-now.Sub(t.last).Seconds() / splitHalfLife.Seconds())
	}
	t.last = now
	for g, v := range t.vol {
		if v *= decay; v < 0.5 {
			delete(t.vol, g)
		} else {
			t.vol[g] = v
		}
	}
	for sk, s := range o.series {
		if sk.level != LevelMinute {
			continue
		}
		var n int64
		for _, b := range s {
			n += b.count
		}
		if n <= 0 {
			continue
		}
		// Bots count under 0xff+name and 0xff (bots.go); their index keys
		// are under their name and their records under their dataset.
		name := strings.TrimPrefix(sk.name, botAll)
		t.vol[splitGroup{sk.ds, name}] += float64(n)
	}
	t.ranges.Store(t.busy())
}

// busy returns the key ranges of the groups with at least 1/minShareInv
// of all the events' volume.
func (t *tableSplits) busy() *[]keyRange {
	var total float64
	for g, v := range t.vol {
		if g.name == "" {
			total += v
		}
	}
	var rs []keyRange
	for g, v := range t.vol {
		if total == 0 || v*minShareInv < total {
			continue
		}
		if g.name != "" {
			p := namePrefix(nil, g.ds, g.name)
			rs = append(rs, keyRange{p, prefixEnd(p)})
			continue
		}
		for _, prefix := range []byte{prefixRecord, prefixDisplaced} {
			p := appendDataset(nil, prefix, g.ds)
			rs = append(rs, keyRange{p, prefixEnd(p)})
		}
	}
	slices.SortFunc(rs, func(a, b keyRange) int { return bytes.Compare(a.lo, b.lo) })
	return &rs
}
