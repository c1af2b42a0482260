package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

func TestValidCursorName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "sink": true, "A-z_0.9": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a b": false, "a/b": false, "é": false, "a:b": false,
	} {
		if got := ValidCursorName(name); got != want {
			t.Errorf("ValidCursorName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestIDBefore(t *testing.T) {
	ms := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixMilli()
	b := idBefore(ms)
	if ids.Time(b) != ms-1 {
		t.Fatalf("idBefore carries %d, want %d", ids.Time(b), ms-1)
	}
	g := ids.NewGenerator()
	id, _ := g.Next()
	for _, tc := range []struct {
		name  string
		id    storage.ID
		after bool
	}{
		{"an id of that millisecond", idAt(ms, 0), true},
		{"the last id of the millisecond before", idBefore(ms), false},
		{"a later id", storage.ID(id), true},
		{"an earlier millisecond", idAt(ms-1, 0xff), false},
	} {
		if got := string(tc.id[:]) > string(b[:]); got != tc.after {
			t.Errorf("%s: after=%v, want %v", tc.name, got, tc.after)
		}
	}
	if idBefore(0) != (storage.ID{}) {
		t.Fatal("idBefore(0) is not the zero id")
	}
}

// idAt is an id of millisecond ms whose low bytes are all fill.
func idAt(ms int64, fill byte) storage.ID {
	id := idBefore(ms + 1)
	for i := 6; i < 16; i++ {
		id[i] = fill
	}
	return id
}

func TestResetPosition(t *testing.T) {
	e := &Engine{ids: ids.NewGenerator()}
	e.horizon = ids.NewHorizon(e.ids)
	evt := "evt_01M7ZXYKBC0YQVV787K3YZYKF1"
	want, _ := ids.ParseEvent(evt)
	for _, tc := range []struct {
		to   string
		ok   bool
		want storage.ID
	}{
		{evt, true, storage.ID(want)},
		{"2026-11-24T12:00:00Z", true, idBefore(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixMilli())},
		{"2026-11-24T12:00:00.250+01:00", true, idBefore(time.Date(2026, 11, 24, 11, 0, 0, 250e6, time.UTC).UnixMilli())},
		{"evt_nope", false, storage.ID{}},
		{"yesterday", false, storage.ID{}},
		{"", false, storage.ID{}},
	} {
		got, err := e.resetPosition(tc.to)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("%q: %x %v", tc.to, got, err)
		}
	}
	before := e.Settled()
	head, err := e.resetPosition("head")
	if err != nil || string(head[:]) < string(before[:]) {
		t.Fatalf("head %x before %x: %v", head, before, err)
	}
}
