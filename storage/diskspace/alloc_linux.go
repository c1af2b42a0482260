package diskspace

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate reserves size bytes for f with fallocate(2), so the blocks are
// really taken (a sparse file would give nothing back when deleted).
func allocate(f *os.File, size int64) error {
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
