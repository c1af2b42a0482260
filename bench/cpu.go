package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// CPU time tells what a run cost, not only how fast it went: on a shared
// machine a server can be slow because it waits (fsync, the scheduler) or
// because it burns CPU, and the two call for different fixes. The bench reads
// the server's CPU time from /proc/<pid>/stat around every run, and its own
// (the load generator's) from getrusage.

// clockTick is the unit of /proc/<pid>/stat's utime and stime (USER_HZ),
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// ParseProcStat returns utime+stime from the text of /proc/<pid>/stat.
func ParseProcStat(b []byte) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	// After the name: state(3) ... utime(14) stime(15), i.e. f[11], f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: short /proc stat")
	}
	u, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	s, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: malformed /proc stat times")
	}
	return time.Duration(u+s) * clockTick, nil
}

// ProcCPU is the CPU time (user + system) a local process has used so far.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseProcStat(b)
}

// ParseSchedstat returns the run-queue wait (the second field, in
// nanoseconds) of a /proc/.../schedstat line: time the thread was ready to
// run but waited for a CPU.
func ParseSchedstat(b []byte) (time.Duration, error) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, fmt.Errorf("bench: short schedstat")
	}
	n, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: malformed schedstat")
	}
	return time.Duration(n), nil
}

// ProcRunqWait sums the run-queue wait of a process's live threads: on a
// machine with more runnable threads than cores, it says how long the server
// was ready but not running. Threads that exited are not counted.
func ProcRunqWait(pid int) (time.Duration, error) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("bench: no schedstat for %d", pid)
	}
	var sum time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		if d, err := ParseSchedstat(b); err == nil {
			sum += d
		}
	}
	return sum, nil
}

// SelfCPU is the CPU time this process (the load generator) has used so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUMeter measures the CPU a run cost the server (pid; 0: unknown, and
// -1: this very process, for baselines run in-process) and the generator.
type CPUMeter struct {
	pid          int
	server, self time.Duration
	ok           bool
	wait         time.Duration
	waitOK       bool
}

// StartCPU takes the first reading.
func StartCPU(pid int) *CPUMeter {
	m := &CPUMeter{pid: pid, self: SelfCPU()}
	m.server, m.ok = m.serverCPU()
	m.wait, m.waitOK = m.runqWait()
	return m
}

func (m *CPUMeter) runqWait() (time.Duration, bool) {
	pid := m.pid
	if pid == -1 {
		pid = os.Getpid()
	}
	if pid <= 0 {
		return 0, false
	}
	d, err := ProcRunqWait(pid)
	return d, err == nil
}

func (m *CPUMeter) serverCPU() (time.Duration, bool) {
	switch {
	case m.pid == -1:
		return SelfCPU(), true
	case m.pid > 0:
		d, err := ProcCPU(m.pid)
		return d, err == nil
	}
	return 0, false
}

// Stop books the CPU used since StartCPU into r.
func (m *CPUMeter) Stop(r *Result) {
	if r == nil {
		return
	}
	if srv, ok := m.serverCPU(); ok && m.ok {
		r.ServerCPU = srv - m.server
		r.HasServerCPU = true
	}
	if w, ok := m.runqWait(); ok && m.waitOK && w >= m.wait {
		r.ServerRunqWait = w - m.wait
	}
	if m.pid != -1 {
		r.ClientCPU = SelfCPU() - m.self
	}
}
