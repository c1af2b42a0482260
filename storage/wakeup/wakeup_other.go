//go:build !linux

package wakeup

import "time"

// supported says Arm wakes the scheduler on this platform.
const supported = false

// Timer does nothing outside Linux: there the runtime's own timers are
// left as they are.
type Timer struct{}

// New returns a Timer that does nothing.
func New() (*Timer, error) { return &Timer{}, nil }

// Arm does nothing.
func (t *Timer) Arm(time.Duration) {}

// Fired is always 0.
func (t *Timer) Fired() uint64 { return 0 }

// Close does nothing.
func (t *Timer) Close() error { return nil }
