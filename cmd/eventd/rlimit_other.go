//go:build !unix

package main

import "log/slog"

// raiseFileLimit has no descriptor limit to raise on this system; 0 makes
// the default cap the ceiling.
func raiseFileLimit(log *slog.Logger) uint64 {
	log.Info("file descriptor limit: not applicable on this system")
	return 0
}
