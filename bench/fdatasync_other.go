//go:build !linux

package bench

import "os"

// fdatasync falls back to a full sync where fdatasync(2) is not offered.
func fdatasync(f *os.File) error { return f.Sync() }
