package bench

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data (not its times), as Pebble's WAL does on Linux.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
