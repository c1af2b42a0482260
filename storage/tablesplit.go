package storage

import (
	"bytes"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// tableSplits is Pebble's SpanPolicyFunc: it ends every flushed or
// compacted table where the key's first byte changes and, within the
// records (S), the displaced events' keys (Z, M) and the name index (N, J),
// where a busy dataset's or a busy dataset and event name's keys begin and
// end.
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
//
// Idempotency keys (H len keyID day key) are split the same way by API key:
// a Segment source's SDK sends time-ordered messageIds, so one key's grow
// at their end too. Commits count them per API key (countIdem), and a key
// with 1/32 of the recent keyed writes gets tables of its own: with four
// sources 6.0 µs per keyed event against 7.2 in eventd-keycost
// (docs/benchmarks.md, proposal 18).
type tableSplits struct {
	ranges atomic.Pointer[[]keyRange] // sorted, disjoint; read by Pebble's goroutines
	// vol is each group's event count, halved every splitHalfLife; written by
	// observe alone, which the derived checkpoints call one at a time.
	vol  map[splitGroup]float64
	last time.Time
	// idem is what the commits since the last observe wrote per API key.
	idemMu sync.Mutex
	idem   map[string]int64
}

// splitGroup is a dataset (name ""), one event name of a dataset, or one
// API key's idempotency keys (keyID set).
type splitGroup struct {
	ds    uint32
	name  string
	keyID string
}

// idemCount is how many idempotency keys of one API key a batch wrote.
type idemCount struct {
	keyID string
	n     int64
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
	t := &tableSplits{vol: map[splitGroup]float64{}, idem: map[string]int64{}}
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
		t.vol[splitGroup{ds: sk.ds, name: name}] += float64(n)
	}
	t.idemMu.Lock()
	for keyID, n := range t.idem {
		t.vol[splitGroup{keyID: keyID}] += float64(n)
	}
	clear(t.idem)
	t.idemMu.Unlock()
	t.ranges.Store(t.busy())
}

// countIdem adds a committed batch's idempotency keys per API key. Keys
// without a key id (eventd-keycost's hashed ones) are left out: their
// group would be dataset 0's, and their range the whole I prefix anyway.
func (t *tableSplits) countIdem(c []idemCount) {
	t.idemMu.Lock()
	for _, x := range c {
		if x.keyID != "" {
			t.idem[x.keyID] += x.n
		}
	}
	t.idemMu.Unlock()
}

// busy returns the key ranges of the groups with at least 1/minShareInv
// of all the events' volume (of all the idempotency keys' for API keys).
func (t *tableSplits) busy() *[]keyRange {
	var events, keyed float64
	for g, v := range t.vol {
		switch {
		case g.keyID != "":
			keyed += v
		case g.name == "":
			events += v
		}
	}
	var rs []keyRange
	for g, v := range t.vol {
		total := events
		if g.keyID != "" {
			total = keyed
		}
		if total == 0 || v*minShareInv < total {
			continue
		}
		if g.keyID != "" {
			p := idemScope(nil, g.keyID)
			rs = append(rs, keyRange{p, prefixEnd(p)})
			continue
		}
		if g.name != "" {
			p := namePrefix(nil, g.ds, g.name)
			rs = append(rs, keyRange{p, prefixEnd(p)})
			p = withPrefix(p, prefixName, prefixDisplacedName)
			rs = append(rs, keyRange{p, prefixEnd(p)})
			continue
		}
		for _, prefix := range []byte{prefixRecord, prefixDisplaced, prefixDisplacedMark} {
			p := appendDataset(nil, prefix, g.ds)
			rs = append(rs, keyRange{p, prefixEnd(p)})
		}
	}
	slices.SortFunc(rs, func(a, b keyRange) int { return bytes.Compare(a.lo, b.lo) })
	return &rs
}
