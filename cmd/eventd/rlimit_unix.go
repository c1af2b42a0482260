//go:build unix

package main

import (
	"log/slog"
	"syscall"
)

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard one, logs both,
// and returns the soft limit in force (0 if unknown). The Go runtime already
// tries the same at start; doing it here makes the outcome visible in the log
// and keeps the caps computed from the real value. A failure is a warning:
// eventd runs with what it has.
func raiseFileLimit(log *slog.Logger) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the file descriptor limit", "err", err)
		return 0
	}
	before := lim.Cur
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the soft file descriptor limit to the hard one", "soft", lim.Cur, "hard", lim.Max, "err", err)
			return lim.Cur
		}
		lim.Cur = lim.Max
	}
	log.Info("file descriptor limit", "soft", lim.Cur, "hard", lim.Max, "soft_before", before)
	return lim.Cur
}
