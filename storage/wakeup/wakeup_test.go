package wakeup

import (
	"testing"
	"time"
)

// waitFired waits, without a deadline of its own, for t to have fired n
// times; the test's timeout bounds it.
func waitFired(t *testing.T, tm *Timer, n uint64) {
	t.Helper()
	for tm.Fired() < n {
		time.Sleep(time.Millisecond)
	}
}

func TestTimerFiresOncePerArm(t *testing.T) {
	tm, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Close() })
	if !supported {
		t.Skip("wakeup: no timerfd on this platform; Timer does nothing")
	}
	tm.Arm(200 * time.Microsecond)
	waitFired(t, tm, 1)
	tm.Arm(0) // fires at once rather than disarming
	waitFired(t, tm, 2)
	// Re-arming replaces the setting: two arms before it is due fire once.
	tm.Arm(time.Hour)
	tm.Arm(time.Microsecond)
	waitFired(t, tm, 3)
	time.Sleep(20 * time.Millisecond)
	if got := tm.Fired(); got != 3 {
		t.Fatalf("fired %d times, want 3", got)
	}
}

func TestClose(t *testing.T) {
	tm, err := New()
	if err != nil {
		t.Fatal(err)
	}
	tm.Arm(time.Hour)
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	tm.Arm(time.Microsecond) // after Close: nothing, no panic
	var none *Timer
	none.Arm(time.Microsecond)
	if none.Fired() != 0 || none.Close() != nil {
		t.Fatal("a nil Timer must do nothing")
	}
}
