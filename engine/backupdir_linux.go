package engine

import "syscall"

// Magic numbers of statfs(2) f_type for the kernel pseudo-filesystems that
// may be mounted outside /proc, /sys and /dev.
var pseudoFSMagic = map[int64]string{
	0x9fa0:     "proc",
	0x62656572: "sysfs",
	0x27e0eb:   "cgroup",
	0x63677270: "cgroup2",
	0x64626720: "debugfs",
	0x74726163: "tracefs",
	0x73636673: "securityfs",
	0x6165676c: "pstore",
	0xcafe4a11: "bpf",
	0x62656570: "configfs",
	0xde5e81e4: "efivarfs",
	0x1cd1:     "devpts",
	0x19800202: "mqueue",
	0x42494e4d: "binfmt_misc",
	0x65735546: "fuse control",
}

// pseudoFS names the pseudo-filesystem holding the nearest existing
// ancestor of p, or "".
func pseudoFS(p string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(existingAncestor(p), &st); err != nil {
		return ""
	}
	return pseudoFSMagic[int64(st.Type)]
}
