package diskspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// BallastResult says what EnsureBallast did.
type BallastResult int

// Outcomes of EnsureBallast.
const (
	BallastNone    BallastResult = iota // size 0: no ballast wanted
	BallastKept                         // a ballast of the right size was there
	BallastCreated                      // created now
	BallastNoRoom                       // not created: it would take free space under the threshold
)

// EnsureBallast makes sure path is a file of size bytes whose blocks are
// really allocated, so that deleting it gives that much room back. It is
// created only when there is room for it: the free space left after it must
// stay at or above the threshold (minFree, as in Config). An existing file
// of another size is replaced on the same terms. Deleting the ballast is the
// operator's way out of a full disk, so it is never recreated while the
// volume is under the threshold, and never while eventd runs.
func EnsureBallast(path string, size, minFree int64, stat StatFunc) (BallastResult, error) {
	if size <= 0 {
		return BallastNone, nil
	}
	if stat == nil {
		stat = Stat
	}
	var existing int64
	if fi, err := os.Stat(path); err == nil {
		if fi.Size() == size {
			return BallastKept, nil
		}
		existing = fi.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return BallastNone, err
	}
	u, err := stat(filepath.Dir(path))
	if err != nil {
		return BallastNone, err
	}
	limit := Threshold(minFree, u.Total)
	if u.Free+uint64(existing) < limit+uint64(size) {
		return BallastNoRoom, nil
	}
	if existing > 0 {
		if err := os.Remove(path); err != nil {
			return BallastNone, err
		}
	}
	tmp := path + ".tmp"
	if err := writeBallast(tmp, size); err != nil {
		_ = os.Remove(tmp)
		return BallastNone, fmt.Errorf("create ballast %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return BallastNone, err
	}
	return BallastCreated, nil
}

// writeBallast allocates size bytes with fallocate, or writes zeros where
// the file system cannot (zeros, not a sparse hole: a hole frees nothing).
func writeBallast(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := allocate(f, size); err != nil {
		if err := writeZeros(f, size); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func writeZeros(f *os.File, size int64) error {
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}
