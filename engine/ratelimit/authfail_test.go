package ratelimit

import (
	"net/netip"
	"testing"
	"time"
)

func TestAuthThrottle(t *testing.T) {
	const (
		fail    = "fail"    // Fail; want is its lockout (0 = answer 401)
		locked  = "locked"  // Locked; want is the time left
		succeed = "succeed" // Succeed
	)
	type step struct {
		op    string
		ip    string
		at    time.Duration // since the start
		times int           // repeat (default 1)
		want  time.Duration
	}
	const a, b = "192.0.2.1", "192.0.2.2"
	min := time.Minute
	tests := []struct {
		name  string
		steps []step
	}{
		{"five failures are free, the sixth locks for 1 s", []step{
			{op: fail, ip: a, times: 5},
			{op: locked, ip: a, want: 0},
			{op: fail, ip: a, at: time.Second, want: time.Second},
			{op: locked, ip: a, at: 1500 * time.Millisecond, want: 500 * time.Millisecond},
			{op: locked, ip: a, at: 2 * time.Second, want: 0},
		}},
		{"each failure after a lockout doubles it, up to 15 min", []step{
			{op: fail, ip: a, times: 5},
			{op: fail, ip: a, want: 1 * time.Second},
			{op: fail, ip: a, at: 1 * time.Second, want: 2 * time.Second},
			{op: fail, ip: a, at: 3 * time.Second, want: 4 * time.Second},
			{op: fail, ip: a, at: 7 * time.Second, want: 8 * time.Second},
			{op: fail, ip: a, at: 15 * time.Second, want: 16 * time.Second},
			{op: fail, ip: a, at: 31 * time.Second, want: 32 * time.Second},
			{op: fail, ip: a, at: 63 * time.Second, want: 64 * time.Second},
			{op: fail, ip: a, at: 127 * time.Second, want: 128 * time.Second},
			{op: fail, ip: a, at: 255 * time.Second, want: 256 * time.Second},
			{op: fail, ip: a, at: 511 * time.Second, want: 512 * time.Second},
			{op: fail, ip: a, at: 1023 * time.Second, want: 15 * min},
			{op: fail, ip: a, at: 1023*time.Second + 15*min, want: 15 * min},
			{op: fail, ip: a, at: 1023*time.Second + 30*min, times: 100, want: 15 * min},
		}},
		{"the sixth failure must fall within 10 minutes of the first", []step{
			{op: fail, ip: a, times: 5},
			{op: fail, ip: a, at: 10 * min, times: 5, want: 0}, // the earlier five have left the window
			{op: fail, ip: a, at: 10*min + time.Second, want: time.Second},
		}},
		{"the sixth failure 9m59s after the first locks", []step{
			{op: fail, ip: a, times: 5},
			{op: fail, ip: a, at: 10*min - time.Second, want: time.Second},
		}},
		{"failures spread out never lock", []step{
			{op: fail, ip: a, at: 0},
			{op: fail, ip: a, at: 2*min + 1},
			{op: fail, ip: a, at: 4*min + 2},
			{op: fail, ip: a, at: 6*min + 3},
			{op: fail, ip: a, at: 8*min + 4},
			{op: fail, ip: a, at: 10*min + 5},
			{op: fail, ip: a, at: 12*min + 6},
			{op: fail, ip: a, at: 14*min + 7},
		}},
		{"a success resets", []step{
			{op: fail, ip: a, times: 5},
			{op: succeed, ip: a},
			{op: fail, ip: a, times: 5},
			{op: fail, ip: a, want: time.Second},
			{op: succeed, ip: a, at: 2 * time.Second},
			{op: locked, ip: a, at: 2 * time.Second},
			{op: fail, ip: a, at: 2 * time.Second, times: 5},
			{op: fail, ip: a, at: 2 * time.Second, want: time.Second},
		}},
		{"addresses are counted apart", []step{
			{op: fail, ip: a, times: 5},
			{op: fail, ip: b, times: 5},
			{op: fail, ip: a, want: time.Second},
			{op: locked, ip: b, want: 0},
			{op: fail, ip: b, want: time.Second},
		}},
		{"an IPv6 /64 is one client; IPv4-mapped is IPv4", []step{
			{op: fail, ip: "2001:db8:1:2::1", times: 3},
			{op: fail, ip: "2001:db8:1:2:ffff::9", times: 2},
			{op: fail, ip: "2001:db8:1:2:abcd::1", want: time.Second},
			{op: locked, ip: "2001:db8:1:3::1", want: 0},
			{op: fail, ip: "::ffff:192.0.2.1", times: 5},
			{op: fail, ip: a, want: time.Second},
		}},
		{"quiet for 10 minutes after a lockout starts over", []step{
			{op: fail, ip: a, times: 5},
			{op: fail, ip: a, want: time.Second},
			{op: fail, ip: a, at: 1 * time.Second, want: 2 * time.Second},
			{op: fail, ip: a, at: 3*time.Second + 10*min - 1, want: 4 * time.Second}, // not quite
			{op: fail, ip: a, at: 7*time.Second + 20*min, times: 5, want: 0},         // quiet: five free again
			{op: fail, ip: a, at: 7*time.Second + 20*min, want: time.Second},
		}},
	}
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := NewAuthThrottle(0)
			for i, s := range tt.steps {
				ip := netip.MustParseAddr(s.ip)
				now := base.Add(s.at)
				for range max(s.times, 1) {
					var got time.Duration
					switch s.op {
					case fail:
						got = th.Fail(ip, now)
					case locked:
						got = th.Locked(ip, now)
					case succeed:
						th.Succeed(ip)
					}
					if got != s.want {
						t.Fatalf("step %d (%s %s at %v): %v, want %v", i, s.op, s.ip, s.at, got, s.want)
					}
				}
			}
		})
	}
}

func TestAuthThrottleBounded(t *testing.T) {
	th := NewAuthThrottle(100)
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	first := netip.MustParseAddr("10.0.0.1")
	th.Fail(first, now)
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		th.Fail(a, now)
		if n := th.Tracked(); n > 100 {
			t.Fatalf("%d addresses tracked, cap 100", n)
		}
	}
	if th.Tracked() != 100 {
		t.Fatalf("%d tracked, want the cap", th.Tracked())
	}
	// The oldest made room: the first address starts from zero again.
	for range AuthFreeFailures {
		if d := th.Fail(first, now); d != 0 {
			t.Fatalf("evicted address still counted: %v", d)
		}
	}
	// A recently failing address keeps its count when others arrive.
	hot := netip.MustParseAddr("10.9.9.9")
	for range AuthFreeFailures {
		th.Fail(hot, now)
	}
	for i := range 50 {
		th.Fail(netip.AddrFrom4([4]byte{10, 2, 0, byte(i)}), now)
	}
	if d := th.Fail(hot, now); d != time.Second {
		t.Fatalf("recent address lost its count: %v", d)
	}
	// Success empties it, and then costs no lock.
	th2 := NewAuthThrottle(0)
	th2.Fail(first, now)
	th2.Succeed(first)
	if th2.Tracked() != 0 {
		t.Fatalf("tracked %d after success", th2.Tracked())
	}
	if allocs := testing.AllocsPerRun(100, func() { th2.Succeed(first); th2.Locked(first, now) }); allocs != 0 {
		t.Fatalf("Succeed/Locked allocate %v times", allocs)
	}
}

func TestAuthThrottleConcurrent(t *testing.T) {
	th := NewAuthThrottle(64)
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 500 {
				a := netip.AddrFrom4([4]byte{10, byte(g), 0, byte(i % 100)})
				th.Locked(a, now)
				th.Fail(a, now)
				if i%7 == 0 {
					th.Succeed(a)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	if n := th.Tracked(); n > 64 {
		t.Fatalf("%d tracked, cap 64", n)
	}
}
