package http

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

func TestParseCursorQuery(t *testing.T) {
	for _, tc := range []struct {
		query  string
		name   string
		window int
		bad    string // the details field, "" when accepted
	}{
		{"", "", DefaultAckWindow, ""},
		{"since=evt_01M7ZXYKBC0YQVV787K3YZYKF1", "", DefaultAckWindow, ""},
		{"cursor=sink", "sink", DefaultAckWindow, ""},
		{"cursor=a.b-c_D9&ack_window=10000", "a.b-c_D9", 10000, ""},
		{"cursor=" + strings.Repeat("x", 64) + "&ack_window=1", strings.Repeat("x", 64), 1, ""},
		{"cursor=", "", 0, "cursor"},
		{"cursor=" + strings.Repeat("x", 65), "", 0, "cursor"},
		{"cursor=a/b", "", 0, "cursor"},
		{"cursor=a&since=evt_01M7ZXYKBC0YQVV787K3YZYKF1", "", 0, "since"},
		{"cursor=a&ack_window=0", "", 0, "ack_window"},
		{"cursor=a&ack_window=10001", "", 0, "ack_window"},
		{"cursor=a&ack_window=ten", "", 0, "ack_window"},
		{"ack_window=5", "", 0, "ack_window"},
	} {
		var args fasthttp.Args
		args.Parse(tc.query)
		name, window, fail := parseCursorQuery(&args)
		switch {
		case tc.bad != "":
			if fail == nil || fail.details[tc.bad] == "" {
				t.Errorf("%q: accepted (%q, %d), want details.%s", tc.query, name, window, tc.bad)
			}
		case fail != nil:
			t.Errorf("%q: refused: %v", tc.query, fail.details)
		case name != tc.name || window != tc.window:
			t.Errorf("%q: got (%q, %d), want (%q, %d)", tc.query, name, window, tc.name, tc.window)
		}
	}
}

func evtID(n byte) storage.ID {
	var id storage.ID
	id[5], id[15] = n, n
	return id
}

// TestCursorAck covers cumulative acknowledgement over the window, and
// what is refused (the connection stays open: ack only returns a message).
func TestCursorAck(t *testing.T) {
	c := &cursorConn{window: 4, wake: make(chan struct{}, 1), position: evtID(1)}
	c.scanned = evtID(9)
	c.unacked = []storage.ID{evtID(2), evtID(4), evtID(6), evtID(8)} // 3, 5, 7, 9 filtered out
	if c.room() != 0 {
		t.Fatalf("room %d with a full window", c.room())
	}
	for _, tc := range []struct {
		id       string
		refused  bool
		position storage.ID
		room     int
	}{
		{"nope", true, evtID(1), 0},
		{ids.FormatEvent(evtID(10)), true, evtID(1), 0}, // never sent
		{ids.FormatEvent(evtID(4)), false, evtID(4), 2},
		{ids.FormatEvent(evtID(3)), false, evtID(4), 2}, // an older ack changes nothing
		{ids.FormatEvent(evtID(5)), false, evtID(5), 2}, // between sent ids: still cumulative
		{ids.FormatEvent(evtID(9)), false, evtID(9), 4}, // up to the last scanned (filtered) id
	} {
		msg := c.ack(tc.id)
		if (msg != nil) != tc.refused || c.position != tc.position || c.room() != tc.room {
			t.Fatalf("ack %s: message %s position %x room %d, want refused=%v %x %d", tc.id, msg, c.position, c.room(), tc.refused, tc.position, tc.room)
		}
	}
	select {
	case <-c.wake:
	default:
		t.Fatal("an ack that opened a full window did not wake the writer")
	}
	if !c.dirty {
		t.Fatal("acks did not mark the position for saving")
	}
}

// TestCursorAckCompacts checks that acks one by one keep the bookkeeping
// about the window's size, not the number of events sent.
func TestCursorAckCompacts(t *testing.T) {
	c := &cursorConn{window: 100, wake: make(chan struct{}, 1)}
	for i := 1; i < 250; i++ {
		id := evtID(byte(i))
		c.unacked = append(c.unacked, id)
		c.scanned = id
		if i > 10 {
			if msg := c.ack(ids.FormatEvent(evtID(byte(i - 10)))); msg != nil {
				t.Fatalf("ack %d: %s", i-10, msg)
			}
		}
		if c.room() != 100-min(i, 10) {
			t.Fatalf("after %d: room %d", i, c.room())
		}
		if len(c.unacked) > 2*100 {
			t.Fatalf("after %d: %d ids kept", i, len(c.unacked))
		}
	}
}

// TestCursorStart: a connection that ends before resending anything keeps
// the redelivery mark of earlier connections.
func TestCursorStart(t *testing.T) {
	for _, tc := range []struct {
		pos, del, wantDel byte
	}{
		{3, 7, 7},
		{5, 5, 5},
		{5, 2, 5}, // a mark behind the position counts for nothing
	} {
		c := &cursorConn{}
		c.Start(storage.Cursor{Position: evtID(tc.pos), Delivered: evtID(tc.del)})
		pos, del := c.CursorState()
		if pos != evtID(tc.pos) || del != evtID(tc.wantDel) || c.scanned != evtID(tc.pos) || c.redeliverTo != evtID(tc.del) {
			t.Fatalf("%+v: position %x delivered %x scanned %x", tc, pos, del, c.scanned)
		}
	}
}
