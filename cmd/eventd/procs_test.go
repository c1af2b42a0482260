package main

import "testing"

func TestProcs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     bool
		n, cpus int
		want    int
	}{
		{"one spare", false, 2, 2, 3},
		{"one CPU", false, 1, 1, 2},
		{"many CPUs", false, 64, 64, 65},
		{"operator's GOMAXPROCS", true, 2, 2, 2},
		{"operator's GOMAXPROCS above the CPUs", true, 8, 2, 8},
		{"CPU quota", false, 2, 8, 2},
	} {
		if got := procs(tc.set, tc.n, tc.cpus); got != tc.want {
			t.Errorf("%s: procs(%v, %d, %d) = %d, want %d", tc.name, tc.set, tc.n, tc.cpus, got, tc.want)
		}
	}
}
