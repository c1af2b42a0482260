package bench

import (
	"strings"
	"testing"
)

func TestStoreWork(t *testing.T) {
	metrics := func(compacted, entries string) []byte {
		return []byte("# HELP eventd_pebble_compaction_bytes_written_total Bytes written by compactions.\n" +
			"# TYPE eventd_pebble_compaction_bytes_written_total counter\n" +
			"eventd_pebble_compaction_bytes_written_total " + compacted + "\n" +
			"eventd_pebble_compactions_total{kind=\"move\"} 3\n" +
			"eventd_visitor_index_memory_entries " + entries + "\n" +
			"eventd_visitor_index_memory_days 1\n")
	}
	tests := []struct {
		name          string
		before, after []byte
		want          StoreWork
	}{
		{"compactions", metrics("1e+06", "100"), metrics("3.097152e+06", "250"), StoreWork{Known: true, CompactedBytes: 2097152}},
		{"a split", metrics("0", "3.999e+06"), metrics("0", "1200"), StoreWork{Known: true, VisitorSplits: 1}},
		{"unreadable before", nil, metrics("0", "1"), StoreWork{}},
		{"a metric missing", metrics("0", "1"), []byte("eventd_pebble_compaction_bytes_written_total 5\n"), StoreWork{}},
		{"not a number", metrics("0", "1"), metrics("x", "1"), StoreWork{}},
	}
	for _, tt := range tests {
		if got := StoreWorkBetween(ReadStore(tt.before), ReadStore(tt.after)); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestStoreWorkNote(t *testing.T) {
	series := func(name string, works ...StoreWork) *Series {
		s := &Series{Name: name}
		for _, w := range works {
			s.Add(&Result{Store: w})
		}
		return s
	}
	split := StoreWork{Known: true, CompactedBytes: 3 << 20, VisitorSplits: 1}
	quiet := StoreWork{Known: true, CompactedBytes: 1 << 20}
	note := StoreWorkNote([]*Series{series("eventd", split, quiet), series("native", quiet, quiet), series("noop")})
	want := "store work during each subject's rounds (left by whatever ran before as often as by the subject): " +
		"eventd 4 MiB compacted, a visitor-memory split; native 2 MiB compacted"
	if note != want {
		t.Errorf("note %q\nwant %q", note, want)
	}
	if note := StoreWorkNote([]*Series{series("eventd", split, split), series("noop")}); note != "" {
		t.Errorf("one subject with store work: %q", note)
	}
	if note := StoreWorkNote([]*Series{series("a", split, split), series("b", split)}); !strings.Contains(note, "a 6 MiB compacted, 2 visitor-memory splits; b 3 MiB") {
		t.Errorf("note %q", note)
	}
}
