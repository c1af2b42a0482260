package ratelimit

import (
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestIPGuard(t *testing.T) {
	type call struct {
		ip        string
		at        time.Duration
		times     int
		wantOK    bool
		wantRetry int64
	}
	tests := []struct {
		name  string
		limit int64
		calls []call
	}{
		{
			name:  "sliding minute per IP",
			limit: 3,
			calls: []call{
				{ip: "10.0.0.1", at: 0, wantOK: true},
				{ip: "10.0.0.1", at: 10 * s, times: 2, wantOK: true},
				{ip: "10.0.0.1", at: 30 * s, wantRetry: 30},
				{ip: "10.0.0.2", at: 30 * s, times: 3, wantOK: true}, // independent counter
				{ip: "10.0.0.1", at: 59*s + 500*time.Millisecond, wantRetry: 1},
				{ip: "10.0.0.1", at: 60 * s, wantOK: true},
				{ip: "10.0.0.1", at: 61 * s, wantRetry: 9}, // both slot-10 requests must leave
			},
		},
		{
			name:  "refusals are not counted",
			limit: 2,
			calls: []call{
				{ip: "::1", at: 0, times: 2, wantOK: true},
				{ip: "::1", at: 1 * s, times: 100, wantRetry: 59},
				{ip: "::1", at: 60 * s, times: 2, wantOK: true},
			},
		},
		{
			name:  "the spec's 600 per minute",
			limit: 600,
			calls: []call{
				{ip: "192.0.2.7", at: 0, times: 300, wantOK: true},
				{ip: "192.0.2.7", at: 30 * s, times: 300, wantOK: true},
				{ip: "192.0.2.7", at: 45 * s, wantRetry: 15},
				{ip: "192.0.2.7", at: 60 * s, times: 300, wantOK: true},
				{ip: "192.0.2.7", at: 60 * s, wantRetry: 30},
			},
		},
		{
			name:  "idle longer than the window starts over",
			limit: 1,
			calls: []call{
				{ip: "a", at: 0, wantOK: true},
				{ip: "a", at: 500 * s, wantOK: true},
				{ip: "a", at: 501 * s, wantRetry: 59},
			},
		},
		{
			name:  "clock a little behind counts at the last instant seen",
			limit: 2,
			calls: []call{
				{ip: "a", at: 100 * s, wantOK: true},
				{ip: "a", at: 90 * s, wantOK: true},
				{ip: "a", at: 90 * s, wantRetry: 60},
				{ip: "a", at: 160 * s, wantOK: true},
			},
		},
		{
			name:  "disabled guard",
			limit: 0,
			calls: []call{
				{ip: "a", at: 0, times: 10000, wantOK: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewIPGuard(tt.limit)
			for i, c := range tt.calls {
				for r := range max(c.times, 1) {
					ok, retry := g.Allow(c.ip, at(c.at))
					if ok != c.wantOK || retry != c.wantRetry {
						t.Fatalf("call %d (%s at +%v, repetition %d): Allow = %v, %d; want %v, %d",
							i, c.ip, c.at, r, ok, retry, c.wantOK, c.wantRetry)
					}
				}
			}
		})
	}
}

// TestIPGuardCopiesKey: callers may pass a string viewing a reused request buffer.
func TestIPGuardCopiesKey(t *testing.T) {
	g := NewIPGuard(1)
	buf := []byte("10.0.0.1")
	ip := unsafe.String(&buf[0], len(buf))
	if ok, _ := g.Allow(ip, at(0)); !ok {
		t.Fatal("first request refused")
	}
	copy(buf, "10.0.0.2")
	if ok, _ := g.Allow("10.0.0.1", at(1*s)); ok {
		t.Error("10.0.0.1 admitted twice: the guard kept the caller's buffer as its key")
	}
}

func TestIPGuardDropsIdleEntries(t *testing.T) {
	g := NewIPGuard(600)
	flood := func(prefix string, n int, when time.Duration) {
		t.Helper()
		for i := range n {
			if ok, _ := g.Allow(prefix+strconv.Itoa(i), at(when)); !ok {
				t.Fatalf("%s%d refused", prefix, i)
			}
		}
	}
	flood("a", 20000, 0)
	if n := g.entries(); n != 20000 {
		t.Fatalf("entries after first flood = %d, want 20000", n)
	}
	// Thousands of IPs per minute reach every shard, so each rotates once per minute.
	flood("b", 5000, 60*s)
	flood("c", 5000, 120*s)
	if n := g.entries(); n != 10000 {
		t.Errorf("entries two minutes later = %d, want 10000 (the first flood dropped)", n)
	}
	// An IP seen in the previous generation keeps its count when it returns.
	g2 := NewIPGuard(3)
	g2.Allow("x", at(0))
	g2.Allow("x", at(59*s))
	g2.Allow("x", at(61*s)) // rotates x's shard: x is found in the old generation
	g2.Allow("x", at(62*s))
	if ok, retry := g2.Allow("x", at(63*s)); ok || retry != 56 {
		t.Errorf("Allow(x) = %v, %d; want false, 56 (slot 59 still counted)", ok, retry)
	}
}

func TestIPGuardCap(t *testing.T) {
	g := NewIPGuard(600)
	g.maxPerShard = 16
	for i := range 10000 {
		g.Allow("10.1."+strconv.Itoa(i), at(0))
	}
	if n, limit := g.entries(), 2*16*ipShards; n > limit {
		t.Errorf("entries = %d, want at most %d", n, limit)
	}
}

// TestIPGuardConcurrent: eight workers share one IP, and each also sends
// from IPs of its own in the same shards; the shared IP gets exactly its
// limit. Every call is at one time: when the workers' clocks ran 0-199 s
// apart, each shard took a call from behind as its clock stepping back and
// one from ahead as a new minute, rotated twice between two calls of the
// shared IP and dropped its count, as IPGuard's doc allows for a rotation
// (the test admitted up to 1,044; 61 runs in 2,000).
func TestIPGuardConcurrent(t *testing.T) {
	g := NewIPGuard(600)
	const workers, calls = 8, 200
	var mu sync.Mutex
	shared := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			own := "own-" + strconv.Itoa(w)
			n := 0
			for i := range calls {
				if ok, _ := g.Allow("203.0.113.9", at(5*s)); ok {
					n++
				}
				g.Allow(own, at(5*s))
				g.Allow(strconv.Itoa(w*calls+i), at(5*s))
			}
			mu.Lock()
			shared += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if shared != 600 {
		t.Errorf("shared IP admitted %d times across workers, want exactly 600", shared)
	}
}

func TestIPGuardAllowDoesNotAllocate(t *testing.T) {
	g := NewIPGuard(600)
	now := at(0)
	g.Allow("198.51.100.4", now)
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(50 * time.Millisecond)
		g.Allow("198.51.100.4", now)
	})
	if allocs != 0 {
		t.Errorf("Allow for a known IP allocates %v times", allocs)
	}
}

func BenchmarkIPGuardAllow(b *testing.B) {
	g := NewIPGuard(600)
	ips := make([]string, 1024)
	for i := range ips {
		ips[i] = "10.0." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255)
	}
	now := at(0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			g.Allow(ips[i&1023], now)
			i++
		}
	})
}
