package wakeup

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// supported says Arm wakes the scheduler on this platform.
const supported = true

// Timer is a timerfd with one goroutine blocked reading it: arming it wakes
// the scheduler when the time comes. Its zero value and nil do nothing.
type Timer struct {
	file  *os.File
	conn  syscall.RawConn // settime through it, never on a closed (or reused) descriptor
	fired atomic.Uint64
	done  chan struct{}
}

// New creates a Timer; Close releases its file and goroutine.
func New() (*Timer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	// A non-blocking descriptor given to os.NewFile is registered with the
	// netpoller: a Read parks the goroutine instead of holding a thread.
	file := os.NewFile(uintptr(fd), "wakeup-timerfd")
	conn, err := file.SyscallConn()
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	t := &Timer{file: file, conn: conn, done: make(chan struct{})}
	go t.run()
	return t, nil
}

func (t *Timer) run() {
	defer close(t.done)
	var buf [8]byte // the number of expirations; only the wake matters
	for {
		if _, err := t.file.Read(buf[:]); err != nil {
			return // closed
		}
		t.fired.Add(1)
	}
}

// Arm sets the timer to fire once, d from now, replacing any earlier
// setting. Safe for concurrent use.
func (t *Timer) Arm(d time.Duration) {
	if t == nil || t.file == nil {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	// An error (the file closed by Close) only loses a wake-up.
	_ = t.conn.Control(func(fd uintptr) { _ = unix.TimerfdSettime(int(fd), 0, &spec, nil) })
}

// Fired is how many times the timer has woken its goroutine.
func (t *Timer) Fired() uint64 {
	if t == nil {
		return 0
	}
	return t.fired.Load()
}

// Close stops the timer and waits for its goroutine to end.
func (t *Timer) Close() error {
	if t == nil || t.file == nil {
		return nil
	}
	err := t.file.Close()
	<-t.done
	return err
}
