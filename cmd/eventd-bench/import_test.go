package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/eventd/eventd/bench"
)

func TestImportBody(t *testing.T) {
	body := importBody(bench.NewTemplate(bench.EventTemplate), 41, 3)
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), body)
	}
	seen := map[string]bool{}
	for i, l := range lines {
		var ev struct {
			Event          string         `json:"event"`
			VisitorID      string         `json:"visitor_id"`
			IdempotencyKey string         `json:"idempotency_key"`
			Properties     map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, l)
		}
		if ev.Event != "purchase" || ev.Properties["amount"] != 12.5 || ev.IdempotencyKey == "" || seen[ev.IdempotencyKey] {
			t.Errorf("line %d: %+v", i, ev)
		}
		seen[ev.IdempotencyKey] = true
	}
	if want := `{"idempotency_key":"imp_41","event":"purchase","visitor_id":"v_41"`; !bytes.HasPrefix(lines[0], []byte(want)) {
		t.Errorf("first line %s, want it to start with %s", lines[0], want)
	}
}
