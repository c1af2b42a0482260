// Package buildinfo says which build of eventd is running: the version and
// VCS revision stamped by the Go toolchain (or by -ldflags), and the Go
// version. `eventd version` and the eventd_build_info metric both read it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Version overrides the module version when set with
// -ldflags "-X github.com/eventd/eventd/buildinfo.Version=v1.2.3".
var Version string

// Info is one build's identity.
type Info struct {
	Version   string // module version, "(devel)" for a source build
	Revision  string // VCS revision, with "-dirty" when the tree was modified; "unknown" without VCS data
	GoVersion string // the Go toolchain that built the binary
}

var (
	once sync.Once
	info Info
)

// Get reads the build's identity once.
func Get() Info {
	once.Do(func() { info = read(debug.ReadBuildInfo) })
	return info
}

// read is Get's logic with the build-info source injected for tests.
func read(src func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := src()
	if ok {
		if v := bi.Main.Version; v != "" {
			i.Version = v
		}
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if dirty {
				rev += "-dirty"
			}
			i.Revision = rev
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
	}
	if Version != "" {
		i.Version = Version
	}
	return i
}
