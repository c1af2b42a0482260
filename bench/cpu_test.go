package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// utime 250 and stime 50 ticks; the name holds a space and a parenthesis.
	stat := "1234 (event d) R 1 1234 1234 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 8 0 100 1000000 2000 18446744073709551615"
	got, err := ParseProcStat([]byte(stat))
	if err != nil || got != 3*time.Second {
		t.Errorf("got %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"", "1234 (x) R 1 2", "1234 (x) R 1 1 1 0 -1 0 0 0 0 0 x 50"} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseSchedstat(t *testing.T) {
	if d, err := ParseSchedstat([]byte("556184 1092559 2\n")); err != nil || d != 1092559 {
		t.Errorf("got %v %v", d, err)
	}
	if _, err := ParseSchedstat([]byte("1")); err == nil {
		t.Error("short line accepted")
	}
}

func TestCPUMeter(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := ProcCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	r := &Result{}
	StartCPU(-1).Stop(r) // in-process baseline: the server is this process
	if !r.HasServerCPU || r.ServerCPU < 0 || r.ClientCPU != 0 {
		t.Errorf("self: %+v", r)
	}
	r = &Result{}
	StartCPU(0).Stop(r) // unknown server: only the generator's CPU
	if r.HasServerCPU || r.ClientCPU < 0 {
		t.Errorf("unknown: %+v", r)
	}
	r = &Result{}
	StartCPU(os.Getpid()).Stop(r)
	if !r.HasServerCPU || r.ServerCPU < 0 {
		t.Errorf("pid: %+v", r)
	}
	StartCPU(os.Getpid()).Stop(nil) // a failed run has no result
	if c := CPUCores(2*time.Second, time.Second); c != 2 || CPUCores(time.Second, 0) != 0 {
		t.Errorf("CPUCores %v", c)
	}
}
