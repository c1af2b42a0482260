package ratelimit

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// base is 2023-11-15T00:00:00Z: aligned to minute, hour, 15 minutes and day,
// so slot boundaries in the tables are plain offsets.
const base = 1_700_006_400

func at(d time.Duration) time.Time { return time.Unix(base, 0).Add(d) }

const s = time.Second

type admitStep struct {
	at        time.Duration
	times     int // repetitions; 0 means 1
	wantOK    bool
	wantRetry int64
}

func runAdmit(t *testing.T, b *Bucket, lim Limits, steps []admitStep) {
	t.Helper()
	for i, st := range steps {
		for r := range max(st.times, 1) {
			ok, retry := b.Admit(at(st.at), lim)
			if ok != st.wantOK || retry != st.wantRetry {
				t.Fatalf("step %d (at +%v, repetition %d): Admit = %v, %d; want %v, %d",
					i, st.at, r, ok, retry, st.wantOK, st.wantRetry)
			}
			checkInvariant(t, b)
		}
	}
}

// checkInvariant guards the cached totals that Admit relies on.
func checkInvariant(t *testing.T, b *Bucket) {
	t.Helper()
	for i := range windows {
		var sum int64
		for _, v := range b.ring(i) {
			sum += int64(v)
		}
		if sum != b.total[i] {
			t.Fatalf("%s: total %d != sum of slots %d", windows[i].name, b.total[i], sum)
		}
	}
}

func TestAdmit(t *testing.T) {
	tests := []struct {
		name  string
		lim   Limits
		steps []admitStep
	}{
		{
			name: "minute window slides by one-second slots",
			lim:  Limits{Minute: 3},
			steps: []admitStep{
				{at: 0, wantOK: true},
				{at: 10 * s, wantOK: true},
				{at: 20 * s, wantOK: true},
				{at: 30 * s, wantRetry: 30},                      // slot 0 leaves at 60
				{at: 59*s + 500*time.Millisecond, wantRetry: 1},  // ceil(0.5)
				{at: 59*s + 999*time.Millisecond, wantRetry: 1},  // never below 1
				{at: 60 * s, wantOK: true},                       // slot 0 start 0 is not > 60-60
				{at: 61 * s, wantRetry: 9},                       // now slot 10 is the oldest
				{at: 70*s + 100*time.Millisecond, wantOK: true},  // slot 10 gone
				{at: 70*s + 900*time.Millisecond, wantRetry: 10}, // slot 20 leaves at 80
			},
		},
		{
			name: "refusals count in no window",
			lim:  Limits{Minute: 2, Hour: 3},
			steps: []admitStep{
				{at: 0, times: 2, wantOK: true},
				{at: 1 * s, times: 50, wantRetry: 59},
				{at: 60 * s, wantOK: true}, // hour would be full had the 50 refusals counted
				{at: 61 * s, wantRetry: 3539},
			},
		},
		{
			name: "hour window uses one-minute slots",
			lim:  Limits{Hour: 2},
			steps: []admitStep{
				{at: 59 * s, wantOK: true}, // slot starting at 0
				{at: 61 * s, wantOK: true}, // slot starting at 60
				{at: 120 * s, wantRetry: 3480},
				{at: 3599 * s, wantRetry: 1},
				{at: 3600 * s, wantOK: true},
				{at: 3601 * s, wantRetry: 59}, // slot 60 leaves at 3660
			},
		},
		{
			name: "day window uses fifteen-minute slots",
			lim:  Limits{Day: 1},
			steps: []admitStep{
				{at: 899 * s, wantOK: true}, // slot starting at 0
				{at: 1000 * s, wantRetry: 85400},
				{at: 86399 * s, wantRetry: 1},
				{at: 86400 * s, wantOK: true},
			},
		},
		{
			name: "retryAfter is the longest wait over exceeded windows",
			lim:  Limits{Minute: 2, Hour: 2},
			steps: []admitStep{
				{at: 0, wantOK: true},
				{at: 1 * s, wantOK: true},
				{at: 2 * s, wantRetry: 3598}, // minute alone would say 58
			},
		},
		{
			name: "a window with room does not extend the wait",
			lim:  Limits{Minute: 1, Hour: 100},
			steps: []admitStep{
				{at: 0, wantOK: true},
				{at: 5 * s, wantRetry: 55},
			},
		},
		{
			name: "analytics: 50 per minute, no hour or day",
			lim:  Analytics,
			steps: []admitStep{
				{at: 0, times: 50, wantOK: true},
				{at: 0, wantRetry: 60},
				{at: 60 * s, times: 50, wantOK: true},
				{at: 60 * s, wantRetry: 60},
				{at: 120 * s, times: 50, wantOK: true}, // 150 in an hour is fine
			},
		},
		{
			name: "batch bucket of the free plan",
			lim:  Limits{100, 5000, 50000}.Tenth(),
			steps: []admitStep{
				{at: 0, times: 10, wantOK: true},
				{at: 30 * s, wantRetry: 30},
			},
		},
		{
			name: "no applicable window never refuses",
			lim:  Limits{},
			steps: []admitStep{
				{at: 0, times: 1000, wantOK: true},
			},
		},
		{
			name: "clock a little behind is treated as the last instant seen",
			lim:  Limits{Minute: 3},
			steps: []admitStep{
				{at: 100 * s, times: 2, wantOK: true},
				{at: 98 * s, wantOK: true}, // counted in slot 100, not slot 98
				{at: 95 * s, wantRetry: 60},
				{at: 159 * s, wantRetry: 1},
				{at: 160 * s, times: 3, wantOK: true},
			},
		},
		{
			name: "clock far behind keeps the counts, never admitting more",
			lim:  Limits{Minute: 1, Hour: 2},
			steps: []admitStep{
				{at: 10000 * s, wantOK: true},
				{at: 6400 * s, wantRetry: 60},   // count moved to the new current slot
				{at: 6460 * s, wantOK: true},    // minute slot gone; hour count now 2
				{at: 6520 * s, wantRetry: 3440}, // hour slot 6360 leaves at 9960
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runAdmit(t, NewBucket(), tt.lim, tt.steps)
		})
	}
}

func TestAdmitAfterLimitLowered(t *testing.T) {
	b := NewBucket()
	runAdmit(t, b, Limits{Minute: 10}, []admitStep{
		{at: 0, times: 3, wantOK: true},
		{at: 10 * s, times: 3, wantOK: true},
		{at: 20 * s, times: 3, wantOK: true},
	})
	// 9 counted, limit now 4: slots 0 and 10 must both leave (6 freed) before one more fits.
	runAdmit(t, b, Limits{Minute: 4}, []admitStep{
		{at: 30 * s, wantRetry: 40},
		{at: 70 * s, wantOK: true},
	})
}

func TestStatus(t *testing.T) {
	free, _ := PlanLimits("free")
	type req struct {
		at    time.Duration
		times int
	}
	tests := []struct {
		name string
		lim  Limits
		reqs []req
		now  time.Duration
		want []WindowStatus
	}{
		{
			name: "empty bucket resets now",
			lim:  free,
			now:  42*s + 700*time.Millisecond,
			want: []WindowStatus{
				{"minute", 60, 100, 100, base + 42},
				{"hour", 3600, 5000, 5000, base + 42},
				{"day", 86400, 50000, 50000, base + 42},
			},
		},
		{
			name: "reset is the newest slot start plus the window",
			lim:  free,
			reqs: []req{{0, 1}, {10 * s, 1}, {70 * s, 2}},
			now:  75*s + 900*time.Millisecond,
			want: []WindowStatus{
				{"minute", 60, 100, 98, base + 130},
				{"hour", 3600, 5000, 4996, base + 3660},
				{"day", 86400, 50000, 49996, base + 86400},
			},
		},
		{
			name: "full window has nothing remaining",
			lim:  Limits{Minute: 2, Hour: 5},
			reqs: []req{{0, 2}},
			now:  1 * s,
			want: []WindowStatus{
				{"minute", 60, 2, 0, base + 60},
				{"hour", 3600, 5, 3, base + 3600},
			},
		},
		{
			name: "idle longer than a window clears it",
			lim:  free,
			reqs: []req{{0, 7}},
			now:  3600 * s,
			want: []WindowStatus{
				{"minute", 60, 100, 100, base + 3600},
				{"hour", 3600, 5000, 5000, base + 3600},
				{"day", 86400, 50000, 49993, base + 86400},
			},
		},
		{
			name: "day window drops slots older than a day",
			lim:  free,
			reqs: []req{{0, 7}, {86399 * s, 1}},
			now:  (86400 + 900) * s,
			want: []WindowStatus{
				{"minute", 60, 100, 100, base + 87300},
				{"hour", 3600, 5000, 4999, base + 86340 + 3600},
				{"day", 86400, 50000, 49999, base + 85500 + 86400},
			},
		},
		{
			name: "only applicable windows, shortest first",
			lim:  Limits{Minute: 50, Day: 10},
			reqs: []req{{0, 3}},
			now:  0,
			want: []WindowStatus{
				{"minute", 60, 50, 47, base + 60},
				{"day", 86400, 10, 7, base + 86400},
			},
		},
		{
			name: "no applicable window",
			lim:  Limits{},
			reqs: []req{{0, 3}},
			now:  0,
			want: []WindowStatus{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBucket()
			for _, r := range tt.reqs {
				for range r.times {
					if ok, _ := b.Admit(at(r.at), tt.lim); !ok {
						t.Fatalf("setup request at +%v refused", r.at)
					}
				}
			}
			got := b.Status(at(tt.now), tt.lim)
			if !reflect.DeepEqual(append([]WindowStatus{}, got...), tt.want) {
				t.Errorf("Status =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestStatusAfterLimitLowered(t *testing.T) {
	b := NewBucket()
	for range 5 {
		b.Admit(at(0), Limits{Minute: 10})
	}
	got := b.Status(at(1*s), Limits{Minute: 3})
	want := []WindowStatus{{"minute", 60, 3, 0, base + 60}}
	if !reflect.DeepEqual(append([]WindowStatus{}, got...), want) {
		t.Errorf("Status = %+v, want %+v", got, want)
	}
}

func TestTightest(t *testing.T) {
	m := WindowStatus{Name: "minute", Seconds: 60, Limit: 100, Remaining: 40, Reset: 1}
	h := WindowStatus{Name: "hour", Seconds: 3600, Limit: 5000, Remaining: 40, Reset: 2}
	d := WindowStatus{Name: "day", Seconds: 86400, Limit: 50000, Remaining: 10, Reset: 3}
	hLow := h
	hLow.Remaining = 5
	tests := []struct {
		name string
		ws   []WindowStatus
		want WindowStatus
	}{
		{"fewest remaining", []WindowStatus{m, h, d}, d},
		{"tie goes to the shortest", []WindowStatus{m, h}, m},
		{"tie goes to the shortest in any order", []WindowStatus{h, m}, m},
		{"middle window", []WindowStatus{m, hLow, d}, hLow},
		{"single", []WindowStatus{h}, h},
		{"empty", nil, WindowStatus{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tightest(tt.ws); got != tt.want {
				t.Errorf("Tightest = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// model is a naive reference: it keeps every admitted second and applies the
// sliding-window rule literally.
type model struct{ reqs []int64 }

func (m *model) inWindow(i int, sec int64) []int64 {
	w := windows[i]
	var in []int64
	for _, r := range m.reqs {
		if start := floorDiv(r, w.res) * w.res; start > sec-w.seconds {
			in = append(in, start)
		}
	}
	return in // ascending, since reqs are
}

func (m *model) admit(sec int64, lim Limits) (bool, int64) {
	var retry int64
	for i, l := range lim.arr() {
		in := m.inWindow(i, sec)
		if l > 0 && int64(len(in)) >= l {
			retry = max(retry, in[int64(len(in))-l]+windows[i].seconds-sec, 1)
		}
	}
	if retry > 0 {
		return false, retry
	}
	for len(m.reqs) > 0 && m.reqs[0] < sec-2*86400 {
		m.reqs = m.reqs[1:] // beyond every window; keeps the model fast
	}
	m.reqs = append(m.reqs, sec)
	return true, 0
}

func (m *model) status(sec int64, lim Limits) []WindowStatus {
	out := []WindowStatus{}
	for i, l := range lim.arr() {
		if l <= 0 {
			continue
		}
		in := m.inWindow(i, sec)
		reset := sec
		if len(in) > 0 {
			reset = in[len(in)-1] + windows[i].seconds
		}
		out = append(out, WindowStatus{windows[i].name, windows[i].seconds, l, max(0, l-int64(len(in))), reset})
	}
	return out
}

// TestAgainstModel drives a bucket and the naive model with the same random
// (but seeded) traffic, including restarts through Marshal/Unmarshal.
func TestAgainstModel(t *testing.T) {
	lims := []Limits{
		{Minute: 5, Hour: 20, Day: 60},
		{Minute: 3, Hour: 4, Day: 5},
		{Minute: 7},
		{Hour: 9},
		{Day: 11},
	}
	for li, lim := range lims {
		t.Run(Kind(li).String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(li), 42))
			b := NewBucket()
			var m model
			now := time.Unix(base, 0)
			var admitted, refused int
			for step := range 20000 {
				switch r := rng.IntN(100); {
				case r < 40: // same second
				case r < 80:
					now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
				case r < 95:
					now = now.Add(time.Duration(rng.IntN(1200)) * s)
				case r < 99:
					now = now.Add(time.Duration(rng.IntN(20000)) * s)
				default:
					now = now.Add(time.Duration(rng.IntN(200000)) * s)
				}
				sec := now.Unix()
				if rng.IntN(50) == 0 {
					got := b.Status(now, lim)
					if want := m.status(sec, lim); !reflect.DeepEqual(append([]WindowStatus{}, got...), want) {
						t.Fatalf("step %d at +%d: Status =\n%+v\nwant\n%+v", step, sec-base, got, want)
					}
				}
				if rng.IntN(200) == 0 {
					p, err := b.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					b = NewBucket()
					if err := b.UnmarshalBinary(p); err != nil {
						t.Fatalf("step %d: restore: %v", step, err)
					}
				}
				gotOK, gotRetry := b.Admit(now, lim)
				wantOK, wantRetry := m.admit(sec, lim)
				if gotOK != wantOK || gotRetry != wantRetry {
					t.Fatalf("step %d at +%d: Admit = %v, %d; want %v, %d", step, sec-base, gotOK, gotRetry, wantOK, wantRetry)
				}
				if gotOK {
					admitted++
				} else {
					refused++
				}
			}
			checkInvariant(t, b)
			if admitted < 1000 || refused < 1000 {
				t.Errorf("admitted %d, refused %d: traffic does not exercise the limit", admitted, refused)
			}
			t.Logf("admitted %d, refused %d", admitted, refused)
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	free, _ := PlanLimits("free")
	b := NewBucket()
	for i := range 100 {
		if ok, _ := b.Admit(at(time.Duration(i)*500*time.Millisecond+7200*s), free); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	p, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > 200 {
		t.Errorf("encoded size %d, want a sparse encoding", len(p))
	}

	// Simulated restart: a new bucket from the saved bytes.
	r := NewBucket()
	if err := r.UnmarshalBinary(p); err != nil {
		t.Fatal(err)
	}
	checkInvariant(t, r)
	now := at(7200*s + 50*s)
	want := append([]WindowStatus{}, b.Status(now, free)...)
	if got := r.Status(now, free); !reflect.DeepEqual(append([]WindowStatus{}, got...), want) {
		t.Errorf("restored Status =\n%+v\nwant\n%+v", got, want)
	}
	if ok, retry := r.Admit(now, free); ok || retry != 10 {
		t.Errorf("restored bucket at its limit: Admit = %v, %d; want false, 10", ok, retry)
	}
	q, _ := r.MarshalBinary()
	p2, _ := b.MarshalBinary()
	if !bytes.Equal(q, p2) {
		t.Errorf("re-encoding differs:\n%x\n%x", q, p2)
	}

	buf := []byte("prefix")
	out, err := b.AppendBinary(buf)
	if err != nil || !bytes.Equal(out, append([]byte("prefix"), p2...)) {
		t.Errorf("AppendBinary = %x, %v", out, err)
	}
}

func TestMarshalEmpty(t *testing.T) {
	p, err := NewBucket().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("RL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	if !bytes.Equal(p, want) {
		t.Errorf("empty bucket = %q, want %q", p, want)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	hdr := "RL\x01\x00\x00\x00\x00\x65\x53\xf1\x00"
	tests := []struct {
		name string
		p    string
	}{
		{"empty", ""},
		{"short header", "RL\x01\x00"},
		{"bad magic", "XX\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"},
		{"unknown version", "RL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"},
		{"instant out of range", "RL\x01\x7f\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00"},
		{"negative instant out of range", "RL\x01\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"},
		{"missing windows", hdr + "\x00"},
		{"truncated varint", hdr + "\x80"},
		{"too many slots", hdr + "\x3d"},
		{"truncated pair", hdr + "\x01\x05"},
		{"position out of range", hdr + "\x01\x3c\x01\x00\x00"},
		{"day position out of range", hdr + "\x00\x00\x01\x60\x01"},
		{"positions not increasing", hdr + "\x02\x05\x01\x05\x01\x00\x00"},
		{"zero count", hdr + "\x01\x05\x00\x00\x00"},
		{"count overflows uint32", hdr + "\x01\x05\x80\x80\x80\x80\x10\x00\x00"},
		{"varint overflows uint64", hdr + "\x01\x05\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x00"},
		{"trailing bytes", hdr + "\x00\x00\x00\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBucket()
			b.Admit(at(0), Limits{})
			before := *b
			if err := b.UnmarshalBinary([]byte(tt.p)); err == nil {
				t.Fatalf("UnmarshalBinary(%q) succeeded", tt.p)
			}
			if *b != before {
				t.Error("failed UnmarshalBinary modified the bucket")
			}
		})
	}
	t.Run("valid control", func(t *testing.T) {
		b := NewBucket()
		if err := b.UnmarshalBinary([]byte(hdr + "\x01\x05\x02\x00\x01\x5f\x03")); err != nil {
			t.Fatal(err)
		}
		if b.total != [3]int64{2, 0, 3} {
			t.Errorf("totals = %v", b.total)
		}
	})
}

func FuzzUnmarshalBinary(f *testing.F) {
	f.Add([]byte{})
	empty, _ := NewBucket().MarshalBinary()
	f.Add(empty)
	b := NewBucket()
	for i := range 300 {
		b.Admit(at(time.Duration(i)*7*s), Limits{})
	}
	busy, _ := b.MarshalBinary()
	f.Add(busy)
	f.Fuzz(func(t *testing.T, p []byte) {
		b := NewBucket()
		if err := b.UnmarshalBinary(p); err != nil {
			return
		}
		checkInvariant(t, b)
		q, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		r := NewBucket()
		if err := r.UnmarshalBinary(q); err != nil {
			t.Fatalf("re-decoding own encoding: %v", err)
		}
		if *r != *b {
			t.Fatal("round trip changed the state")
		}
		// A restored bucket must stay usable whatever instant it claims.
		now := time.Unix(b.last, 0)
		for _, d := range []time.Duration{0, -30 * s, -2 * time.Hour, 90 * s, 48 * time.Hour} {
			b.Admit(now.Add(d), Limits{Minute: 3, Hour: 10, Day: 20})
			b.Status(now.Add(d), Limits{Minute: 3, Hour: 10, Day: 20})
			checkInvariant(t, b)
		}
	})
}

func TestAdmitDoesNotAllocate(t *testing.T) {
	free, _ := PlanLimits("free")
	b := NewBucket()
	now := at(0)
	var admitted, refused int
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(300 * time.Millisecond) // reaches the limit, so both paths run
		if ok, _ := b.Admit(now, free); ok {
			admitted++
		} else {
			refused++
		}
	})
	if allocs != 0 {
		t.Errorf("Admit allocates %v times per call", allocs)
	}
	if admitted == 0 || refused == 0 {
		t.Errorf("admitted %d, refused %d: want both paths exercised", admitted, refused)
	}
	allocs = testing.AllocsPerRun(100, func() {
		b.Status(now, free)
	})
	if allocs != 0 {
		t.Errorf("Status allocates %v times per call", allocs)
	}
}

func BenchmarkAdmit(b *testing.B) {
	free, _ := PlanLimits("enterprise")
	bk := NewBucket()
	now := at(0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(17 * time.Millisecond)
		bk.Admit(now, free)
	}
}

func BenchmarkStatus(b *testing.B) {
	free, _ := PlanLimits("free")
	bk := NewBucket()
	for i := range 90 {
		bk.Admit(at(time.Duration(i)*s), free)
	}
	b.ReportAllocs()
	for b.Loop() {
		bk.Status(at(100*s), free)
	}
}

func TestBucketBlockedDoesNotCount(t *testing.T) {
	b := NewBucket()
	lim := Limits{Minute: 2, Hour: 10, Day: 100}
	now := time.Unix(1_700_000_000, 0)
	for i := 0; i < 2; i++ {
		if r := b.Blocked(now, lim); r != 0 {
			t.Fatalf("blocked %d s with room", r)
		}
		if ok, _ := b.Admit(now, lim); !ok {
			t.Fatal("refused with room")
		}
	}
	r := b.Blocked(now, lim)
	ok, retry := b.Admit(now, lim)
	if ok || r != retry || r < 1 {
		t.Fatalf("Blocked %d, Admit (%v, %d)", r, ok, retry)
	}
	if b.Blocked(now, lim) != r || b.Status(now, lim)[0].Remaining != 0 {
		t.Fatal("Blocked changed the counts")
	}
	if r := b.Blocked(now.Add(61*time.Second), lim); r != 0 {
		t.Fatalf("still blocked %d s after the minute", r)
	}
}
