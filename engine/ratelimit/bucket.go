package ratelimit

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// A window of n slots of res seconds is exact for the "slot start > now - size"
// rule: at any instant it covers precisely the n newest slots, the current one
// included, so a ring indexed by (absolute slot number mod n) needs no
// per-slot timestamps.
type winSpec struct {
	name    string
	seconds int64 // window size
	res     int64 // slot width
	n       int   // slots
	off     int   // first slot in Bucket.slots
}

const numWindows = 3

var windows = [numWindows]winSpec{
	{name: "minute", seconds: 60, res: 1, n: 60, off: 0},
	{name: "hour", seconds: 3600, res: 60, n: 60, off: 60},
	{name: "day", seconds: 86400, res: 900, n: 96, off: 120},
}

const numSlots = 60 + 60 + 96

// maxClockStep bounds how far back the clock may step and still be treated as
// "now = last seen"; freezing the windows for longer than one minute window
// would lock a key out, so larger steps are handled by collapse.
const maxClockStep = 60

// WindowStatus describes one window at an instant.
type WindowStatus struct {
	Name      string // "minute", "hour" or "day"
	Seconds   int64  // window size: 60, 3600 or 86400
	Limit     int64
	Remaining int64 // max(0, Limit - count)
	Reset     int64 // Unix second when the window is back to its full limit; now's second when it is empty
}

// Bucket holds the sliding minute, hour and day windows of one key and bucket kind.
//
// It is not safe for concurrent use: its single owner (the key actor) serialises
// access, which keeps Admit lock-free and allocation-free. The zero value is an
// empty bucket ready to use.
type Bucket struct {
	last  int64                    // Unix second of the newest instant seen
	total [numWindows]int64        // sum of each window's slots, kept so Admit is O(1)
	slots [numSlots]uint32         // minute, hour and day rings back to back
	st    [numWindows]WindowStatus // backing array for Status, so it does not allocate
}

// NewBucket returns an empty bucket (minute: 60 slots of 1 s; hour: 60 of 1 min; day: 96 of 15 min).
func NewBucket() *Bucket { return new(Bucket) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

func (b *Bucket) ring(i int) []uint32 {
	w := &windows[i]
	return b.slots[w.off : w.off+w.n]
}

func (b *Bucket) empty() bool { return b.total == [numWindows]int64{} }

// advance expires slots up to sec and returns the instant the caller must use,
// which differs from sec only when the clock stepped back a little.
func (b *Bucket) advance(sec int64) int64 {
	switch {
	case sec == b.last:
		return sec
	case b.empty():
		// Nothing to expire, and with no counts the ring alignment is irrelevant.
		b.last = sec
		return sec
	case sec < b.last:
		if b.last-sec <= maxClockStep {
			return b.last
		}
		b.collapse(sec)
		return sec
	}
	for i := range windows {
		w := &windows[i]
		from, to := floorDiv(b.last, w.res), floorDiv(sec, w.res)
		if to == from {
			continue
		}
		s := b.ring(i)
		if to-from >= int64(w.n) {
			clear(s)
			b.total[i] = 0
			continue
		}
		for a := from + 1; a <= to; a++ {
			j := floorMod(a, int64(w.n))
			b.total[i] -= int64(s[j])
			s[j] = 0
		}
	}
	b.last = sec
	return sec
}

// collapse handles a large backward clock step (or state restored from a
// clock that ran ahead): the slots cannot be placed on the new time line, so
// each window's whole count moves into its current slot. That never admits
// more than the limits allow; at worst it refuses for up to one window longer.
func (b *Bucket) collapse(sec int64) {
	for i := range windows {
		w := &windows[i]
		s := b.ring(i)
		clear(s)
		v := min(b.total[i], math.MaxUint32)
		s[floorMod(floorDiv(sec, w.res), int64(w.n))] = uint32(v)
		b.total[i] = v
	}
	b.last = sec
}

// Admit counts one request at now if every applicable window has room (count < limit);
// otherwise it counts nothing and retryAfter is the whole seconds (>= 1) until enough
// slots expire for the request to fit in every exceeded window.
//
// With counts never above the limit (the normal case) "enough slots" is the first
// non-empty slot to leave; it differs only after a limit was lowered.
// A request is counted in all three windows, applicable or not, so that a later
// change of limits sees the real history.
func (b *Bucket) Admit(now time.Time, lim Limits) (allowed bool, retryAfter int64) {
	sec := b.advance(now.Unix())
	if retryAfter = b.check(sec, lim); retryAfter > 0 {
		return false, retryAfter
	}
	for i := range windows {
		w := &windows[i]
		j := w.off + int(floorMod(floorDiv(sec, w.res), int64(w.n)))
		if b.slots[j] < math.MaxUint32 { // saturate rather than wrap; total stays the true sum
			b.slots[j]++
			b.total[i]++
		}
	}
	return true, 0
}

// Blocked reports, without counting, the whole seconds (>= 1) until Admit at
// now could succeed, or 0 when it would succeed now. The key actor publishes
// it so the HTTP layer can refuse an over-limit request from its headers,
// before reading its body, and answers with it the writes refused for another
// reason after the rate limit (a full disk), which count nothing.
func (b *Bucket) Blocked(now time.Time, lim Limits) int64 {
	return b.check(b.advance(now.Unix()), lim)
}

// check returns 0 when every applicable window has room at sec, else the
// seconds until the request fits in every exceeded window.
func (b *Bucket) check(sec int64, lim Limits) (retryAfter int64) {
	lims := lim.arr()
	for i := range windows {
		if l := lims[i]; l > 0 && b.total[i] >= l {
			retryAfter = max(retryAfter, b.retry(i, sec, l))
		}
	}
	return retryAfter
}

// retry returns the seconds from sec until window i holds fewer than l.
func (b *Bucket) retry(i int, sec, l int64) int64 {
	w := &windows[i]
	s := b.ring(i)
	n := int64(w.n)
	cur := floorDiv(sec, w.res)
	need := b.total[i] - l + 1
	var freed int64
	for a := cur - n + 1; a <= cur; a++ {
		freed += int64(s[floorMod(a, n)])
		if freed >= need {
			return max(a*w.res+w.seconds-sec, 1)
		}
	}
	return w.seconds // unreachable while total is the sum of the slots
}

// Status reports the applicable windows (limit > 0), shortest first, after expiring old slots.
//
// The returned slice aliases storage inside b (so Status does not allocate): it is
// valid until the next call of any method on b; copy it to keep it longer.
func (b *Bucket) Status(now time.Time, lim Limits) []WindowStatus {
	sec := b.advance(now.Unix())
	lims := lim.arr()
	out := b.st[:0]
	for i := range windows {
		l := lims[i]
		if l <= 0 {
			continue
		}
		w := &windows[i]
		out = append(out, WindowStatus{
			Name:      w.name,
			Seconds:   w.seconds,
			Limit:     l,
			Remaining: max(0, l-b.total[i]),
			Reset:     b.reset(i, sec),
		})
	}
	return out
}

// reset is when the newest non-empty slot leaves window i: only then is the
// whole limit available again.
func (b *Bucket) reset(i int, sec int64) int64 {
	if b.total[i] == 0 {
		return sec
	}
	w := &windows[i]
	s := b.ring(i)
	n := int64(w.n)
	cur := floorDiv(sec, w.res)
	for a := cur; a > cur-n; a-- {
		if s[floorMod(a, n)] != 0 {
			return a*w.res + w.seconds
		}
	}
	return sec // unreachable while total is the sum of the slots
}

// Tightest is the window with the fewest remaining, ties to the shortest: the one the X-RateLimit-* headers describe.
// It returns the zero WindowStatus for an empty ws.
func Tightest(ws []WindowStatus) WindowStatus {
	var best WindowStatus
	for i, w := range ws {
		if i == 0 || w.Remaining < best.Remaining || (w.Remaining == best.Remaining && w.Seconds < best.Seconds) {
			best = w
		}
	}
	return best
}

// Persistence format, version 1:
//
//	"RL" 0x01, last as 8-byte big-endian int64, then per window (minute, hour, day):
//	uvarint k (non-empty slots), then k pairs of uvarint ring position (strictly
//	increasing, < slots in the window) and uvarint count (1..2^32-1).
//
// Sparse because most keys are idle in most slots, and the state of every key
// is rewritten every few seconds.
const (
	magic0, magic1 = 'R', 'L'
	formatVersion  = 1
	headerLen      = 3 + 8
	// maxAbsUnix keeps restored instants far from int64 overflow in the slot arithmetic.
	maxAbsUnix = 1 << 40
)

var errFormat = errors.New("ratelimit: malformed bucket state")

// MarshalBinary persists the slots so that windows survive a restart.
func (b *Bucket) MarshalBinary() ([]byte, error) {
	return b.AppendBinary(make([]byte, 0, 64))
}

// AppendBinary is MarshalBinary into a caller's buffer, for a persister that reuses one.
func (b *Bucket) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, magic0, magic1, formatVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.last))
	for i := range windows {
		s := b.ring(i)
		k := 0
		for _, v := range s {
			if v != 0 {
				k++
			}
		}
		dst = binary.AppendUvarint(dst, uint64(k))
		for j, v := range s {
			if v != 0 {
				dst = binary.AppendUvarint(dst, uint64(j))
				dst = binary.AppendUvarint(dst, uint64(v))
			}
		}
	}
	return dst, nil
}

// UnmarshalBinary restores state written by MarshalBinary; on error b is left unchanged.
func (b *Bucket) UnmarshalBinary(p []byte) error {
	if len(p) < headerLen || p[0] != magic0 || p[1] != magic1 {
		return errFormat
	}
	if p[2] != formatVersion {
		return errors.New("ratelimit: unsupported bucket state version")
	}
	var nb Bucket
	nb.last = int64(binary.BigEndian.Uint64(p[3:headerLen]))
	if nb.last > maxAbsUnix || nb.last < -maxAbsUnix {
		return errFormat
	}
	p = p[headerLen:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	for i := range windows {
		s := nb.ring(i)
		k, ok := uv()
		if !ok || k > uint64(len(s)) {
			return errFormat
		}
		next := uint64(0) // smallest position allowed next: positions strictly increase
		for ; k > 0; k-- {
			j, ok1 := uv()
			v, ok2 := uv()
			if !ok1 || !ok2 || j < next || j >= uint64(len(s)) || v == 0 || v > math.MaxUint32 {
				return errFormat
			}
			s[j] = uint32(v)
			nb.total[i] += int64(v)
			next = j + 1
		}
	}
	if len(p) != 0 {
		return errFormat
	}
	*b = nb
	return nil
}
