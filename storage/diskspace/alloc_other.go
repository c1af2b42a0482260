//go:build !linux

package diskspace

import (
	"errors"
	"os"
)

// allocate has no fallocate here: Ballast falls back to writing zeros.
func allocate(*os.File, int64) error { return errors.ErrUnsupported }
