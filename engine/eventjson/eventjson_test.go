package eventjson

import (
	"testing"

	"github.com/eventd/eventd/storage"
)

func TestAppend(t *testing.T) {
	id := storage.ID{0x01, 0x8f}
	const ts = int64(1764000000000)
	cases := []struct {
		name string
		e    storage.Event
		full bool
		want string
	}{
		{"full with visitor", storage.Event{ID: id, Name: "signup", VisitorID: "v\"1", HasVisitor: true, Properties: []byte(`{"a":1}`), Timestamp: ts, CreatedAt: ts + 1},
			true, `{"id":"evt_01HW0000000000000000000000","event":"signup","visitor_id":"v\"1","properties":{"a":1},"timestamp":"2025-11-24T16:00:00.000Z","created_at":"2025-11-24T16:00:00.001Z"}`},
		{"full without visitor or properties", storage.Event{ID: id, Name: "signup", Timestamp: ts, CreatedAt: ts},
			true, `{"id":"evt_01HW0000000000000000000000","event":"signup","properties":{},"timestamp":"2025-11-24T16:00:00.000Z","created_at":"2025-11-24T16:00:00.000Z"}`},
		{"list row without visitor", storage.Event{ID: id, Name: "signup", Properties: []byte(`{"a":1}`), Timestamp: ts, CreatedAt: ts},
			false, `{"id":"evt_01HW0000000000000000000000","event":"signup","visitor_id":null,"timestamp":"2025-11-24T16:00:00.000Z"}`},
		{"list row with visitor", storage.Event{ID: id, Name: "signup", VisitorID: "v1", HasVisitor: true, Timestamp: ts, CreatedAt: ts},
			false, `{"id":"evt_01HW0000000000000000000000","event":"signup","visitor_id":"v1","timestamp":"2025-11-24T16:00:00.000Z"}`},
	}
	for _, c := range cases {
		if got := string(Append(nil, &c.e, c.full)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
