package ratelimit

import (
	"testing"
	"time"
)

func TestPolicyHeader(t *testing.T) {
	free, _ := PlanLimits("free")
	tests := []struct {
		name string
		lim  Limits
		want string
	}{
		{"free plan", free, `"minute";q=100;w=60, "hour";q=5000;w=3600, "day";q=50000;w=86400`},
		{"batch", free.Tenth(), `"minute";q=10;w=60, "hour";q=500;w=3600, "day";q=5000;w=86400`},
		{"analytics", Analytics, `"minute";q=50;w=60`},
		{"no window", Limits{}, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := NewBucket().Status(at(0), tt.lim)
			if got := string(PolicyHeader(nil, ws)); got != tt.want {
				t.Errorf("PolicyHeader = %s\nwant           %s", got, tt.want)
			}
		})
	}
}

func TestRateLimitHeader(t *testing.T) {
	tests := []struct {
		name string
		w    WindowStatus
		now  time.Duration
		want string
	}{
		{"minute", WindowStatus{"minute", 60, 100, 42, base + 18}, 0, `"minute";r=42;t=18`},
		{"fraction of a second ignored", WindowStatus{"minute", 60, 100, 42, base + 18}, 900 * time.Millisecond, `"minute";r=42;t=18`},
		{"empty window", WindowStatus{"hour", 3600, 5000, 5000, base}, 0, `"hour";r=5000;t=0`},
		{"reset in the past clamps to zero", WindowStatus{"day", 86400, 50000, 0, base - 5}, 0, `"day";r=0;t=0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(RateLimitHeader(nil, tt.w, at(tt.now))); got != tt.want {
				t.Errorf("RateLimitHeader = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestHeadersFromBucket renders what a response carries after some traffic.
func TestHeadersFromBucket(t *testing.T) {
	free, _ := PlanLimits("free")
	b := NewBucket()
	for i := range 58 {
		b.Admit(at(time.Duration(i%3)*s), free)
	}
	now := at(42 * s)
	ws := b.Status(now, free)
	tw := Tightest(ws)
	if tw.Name != "minute" || tw.Limit != 100 || tw.Remaining != 42 || tw.Reset != base+62 {
		t.Fatalf("Tightest = %+v", tw)
	}
	if got, want := string(RateLimitHeader([]byte("RateLimit: "), tw, now)), `RateLimit: "minute";r=42;t=20`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestHeadersDoNotAllocate(t *testing.T) {
	free, _ := PlanLimits("free")
	b := NewBucket()
	now := at(0)
	buf := make([]byte, 0, 128)
	allocs := testing.AllocsPerRun(100, func() {
		ws := b.Status(now, free)
		buf = PolicyHeader(buf[:0], ws)
		buf = RateLimitHeader(buf[:0], Tightest(ws), now)
	})
	if allocs != 0 {
		t.Errorf("header rendering allocates %v times", allocs)
	}
}
