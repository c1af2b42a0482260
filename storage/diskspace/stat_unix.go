//go:build unix

package diskspace

import "golang.org/x/sys/unix"

// Stat reads the volume holding path with statfs(2).
func Stat(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, err
	}
	bs := uint64(st.Bsize) //nolint:unconvert // int64 on Linux, uint32 elsewhere
	return Usage{Total: uint64(st.Blocks) * bs, Free: uint64(st.Bavail) * bs}, nil
}
