package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     Info
	}{
		{"no build info", nil, "", Info{Version: "(devel)", Revision: "unknown"}},
		{"vcs clean", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			"", Info{Version: "v1.2.0", Revision: "abc", GoVersion: "go1.26.8"}},
		{"vcs dirty", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"", Info{Version: "(devel)", Revision: "abc-dirty", GoVersion: "go1.26.8"}},
		{"ldflags override", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"v9.9.9", Info{Version: "v9.9.9", Revision: "unknown", GoVersion: "go1.26.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := Version
			Version = tt.override
			t.Cleanup(func() { Version = old })
			got := read(func() (*debug.BuildInfo, bool) { return tt.bi, tt.bi != nil })
			if tt.want.GoVersion == "" {
				tt.want.GoVersion = got.GoVersion // runtime.Version(), whatever built the test
			}
			if got != tt.want {
				t.Fatalf("read = %+v, want %+v", got, tt.want)
			}
		})
	}
}
