package test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pubISO formats a time as the client sends it (ms precision, Z).
func pubISO(tm time.Time) string { return tm.UTC().Format("2006-01-02T15:04:05.000Z") }

func TestCreateEvent(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "create", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")

	t.Run("minimal body, default timestamp is receipt", func(t *testing.T) {
		before := time.Now().UnixMilli()
		c := pubCreate(t, s, key, map[string]any{"event": "signup"})
		after := time.Now().UnixMilli()
		if c.Event != "signup" {
			t.Fatalf("event %q", c.Event)
		}
		ts := pubMustTime(t, c.Timestamp)
		if ts < before || ts > after {
			t.Fatalf("default timestamp %s outside [%s, %s]", c.Timestamp, pubMsText(before), pubMsText(after))
		}
		e := pubGetEvent(t, s, key, c.ID)
		if e.ID != c.ID || e.Event != "signup" || e.Timestamp != c.Timestamp || e.VisitorID != nil || string(e.Properties) != "{}" {
			t.Fatalf("stored %+v (properties %s), created %+v", e, e.Properties, c)
		}
		if ca := pubMustTime(t, e.CreatedAt); ca < before || ca > after {
			t.Fatalf("created_at %s outside the request", e.CreatedAt)
		}
	})

	t.Run("full body round trip", func(t *testing.T) {
		props := map[string]any{
			"plan": "pro", "amount": 49.99, "tags": []any{"a", "b"}, "nested": map[string]any{"k": nil, "t": true},
			"text": "é中\"\\\n\t<>&\u2028", "big": 1e300, "zero": 0,
		}
		c := pubCreate(t, s, key, map[string]any{"event": "Purchase_Completed_2", "visitor_id": "visitor-123 é", "properties": props,
			"timestamp": "2025-06-15T10:30:00.250Z"})
		if c.Event != "Purchase_Completed_2" || c.Timestamp != "2025-06-15T10:30:00.250Z" {
			t.Fatalf("created %+v", c)
		}
		e := pubGetEvent(t, s, key, c.ID)
		if e.VisitorID == nil || *e.VisitorID != "visitor-123 é" || e.Event != c.Event || e.Timestamp != c.Timestamp {
			t.Fatalf("stored %+v", e)
		}
		var got map[string]any
		if err := json.Unmarshal(e.Properties, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		_ = json.Unmarshal(pubMarshal(t, props), &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("properties %s, want %v", e.Properties, want)
		}
	})

	t.Run("timestamps normalised to UTC ms", func(t *testing.T) {
		for _, tc := range []struct{ in, want string }{
			{"2025-06-15T12:30:00+02:00", "2025-06-15T10:30:00.000Z"},
			{"2025-06-15T05:00:00-05:30", "2025-06-15T10:30:00.000Z"},
			{"2025-06-16T00:30:00+14:00", "2025-06-15T10:30:00.000Z"},
			{"2025-06-15T10:30:00Z", "2025-06-15T10:30:00.000Z"},
			{"2025-06-15T10:30:00z", "2025-06-15T10:30:00.000Z"},
			{"2025-06-15T10:30:00.123456789Z", "2025-06-15T10:30:00.123Z"},
			{"2025-06-15T10:30:00.5Z", "2025-06-15T10:30:00.500Z"},
			{"2025-06-15T10:30:00.999+01:00", "2025-06-15T09:30:00.999Z"},
			{"2025-06-15T10:30:00", "2025-06-15T10:30:00.000Z"},
			{"2025-06-15T10:30:00+0200", "2025-06-15T08:30:00.000Z"},
			{"2024-02-29T23:59:59.999Z", "2024-02-29T23:59:59.999Z"},
			{"1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"},
			{"2025-06-15", "2025-06-15T00:00:00.000Z"},
		} {
			t.Run(tc.in, func(t *testing.T) {
				c := pubCreate(t, s, key, map[string]any{"event": "ts", "timestamp": tc.in})
				if c.Timestamp != tc.want {
					t.Fatalf("timestamp %q -> %q, want %q", tc.in, c.Timestamp, tc.want)
				}
				if e := pubGetEvent(t, s, key, c.ID); e.Timestamp != tc.want {
					t.Fatalf("stored timestamp %q, want %q", e.Timestamp, tc.want)
				}
			})
		}
	})

	t.Run("future limit", func(t *testing.T) {
		c := pubCreate(t, s, key, map[string]any{"event": "soon", "timestamp": pubISO(time.Now().Add(50 * time.Minute))})
		_ = c
		for _, d := range []time.Duration{61 * time.Minute, 2 * time.Hour, 24 * 365 * time.Hour} {
			r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "later", "timestamp": pubISO(time.Now().Add(d))})
			pubWantDetail(t, r, 422, "validation_error", "timestamp", "future")
		}
		r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "later", "timestamp": "9999-12-31T23:59:59Z"})
		pubWantDetail(t, r, 422, "validation_error", "timestamp", "")
	})

	t.Run("sent_at skew correction", func(t *testing.T) {
		// Client clock one hour behind: its timestamp is moved forward by received - sent_at.
		now := time.Now()
		sent := now.Add(-time.Hour).Truncate(time.Millisecond)
		ts := sent.Add(-10 * time.Second)
		before := time.Now().UnixMilli()
		c := pubCreate(t, s, key, map[string]any{"event": "skew", "timestamp": pubISO(ts), "sent_at": pubISO(sent)})
		after := time.Now().UnixMilli()
		got := pubMustTime(t, c.Timestamp)
		lo, hi := ts.UnixMilli()+before-sent.UnixMilli(), ts.UnixMilli()+after-sent.UnixMilli()
		if got < lo || got > hi {
			t.Fatalf("corrected timestamp %s outside [%s, %s]", c.Timestamp, pubMsText(lo), pubMsText(hi))
		}
		if e := pubGetEvent(t, s, key, c.ID); e.Timestamp != c.Timestamp {
			t.Fatalf("stored %s, answered %s", e.Timestamp, c.Timestamp)
		}

		// Client clock two hours ahead: a timestamp "in the future" by its
		// clock is corrected back, then passes the future check.
		sent = time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
		ts = sent.Add(-5 * time.Second)
		before = time.Now().UnixMilli()
		c = pubCreate(t, s, key, map[string]any{"sent_at": pubISO(sent), "event": "skew", "timestamp": pubISO(ts)})
		after = time.Now().UnixMilli()
		got = pubMustTime(t, c.Timestamp)
		lo, hi = ts.UnixMilli()+before-sent.UnixMilli(), ts.UnixMilli()+after-sent.UnixMilli()
		if got < lo || got > hi {
			t.Fatalf("corrected timestamp %s outside [%s, %s]", c.Timestamp, pubMsText(lo), pubMsText(hi))
		}

		// Offsets in sent_at are honoured.
		sent = time.Now().Add(-30 * time.Minute).Truncate(time.Second)
		ts = sent.Add(-time.Minute)
		before = time.Now().UnixMilli()
		c = pubCreate(t, s, key, map[string]any{"event": "skew", "timestamp": ts.In(time.FixedZone("", 3*3600)).Format(time.RFC3339),
			"sent_at": sent.In(time.FixedZone("", -7*3600)).Format(time.RFC3339)})
		after = time.Now().UnixMilli()
		got = pubMustTime(t, c.Timestamp)
		lo, hi = ts.UnixMilli()+before-sent.UnixMilli(), ts.UnixMilli()+after-sent.UnixMilli()
		if got < lo || got > hi {
			t.Fatalf("corrected timestamp %s outside [%s, %s]", c.Timestamp, pubMsText(lo), pubMsText(hi))
		}

		// sent_at without timestamp: the timestamp is the receipt time.
		before = time.Now().UnixMilli()
		c = pubCreate(t, s, key, map[string]any{"event": "skew", "sent_at": pubISO(time.Now().Add(-5 * time.Hour))})
		after = time.Now().UnixMilli()
		if got := pubMustTime(t, c.Timestamp); got < before || got > after {
			t.Fatalf("timestamp %s is not the receipt time", c.Timestamp)
		}

		// Bad sent_at.
		for _, v := range []any{"yesterday", 12345, true, "2025-13-01T00:00:00Z"} {
			r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "skew", "timestamp": "2025-01-01T00:00:00Z", "sent_at": v})
			pubWantDetail(t, r, 400, "bad_request", "sent_at", "")
		}
	})

	t.Run("unknown top-level fields ignored", func(t *testing.T) {
		c := pubCreate(t, s, key, `{"event":"fwd","context":{"ip":"1.2.3.4","deep":[[[1]]]},"type":"track","userId":5,"idempotency_key":"x","properties":{"a":1}}`)
		e := pubGetEvent(t, s, key, c.ID)
		if string(e.Properties) != `{"a":1}` {
			t.Fatalf("properties %s", e.Properties)
		}
		// An unknown field does not make the single route idempotent.
		c2 := pubCreate(t, s, key, `{"event":"fwd","idempotency_key":"x","properties":{"a":1}}`)
		if c2.ID == c.ID {
			t.Fatalf("idempotency_key in a single body deduplicated")
		}
	})

	t.Run("null optional fields are absent", func(t *testing.T) {
		c := pubCreate(t, s, key, `{"event":"nulls","visitor_id":null,"properties":null,"timestamp":null}`)
		e := pubGetEvent(t, s, key, c.ID)
		if e.VisitorID != nil || string(e.Properties) != "{}" {
			t.Fatalf("stored %+v %s", e, e.Properties)
		}
	})

	t.Run("edges accepted", func(t *testing.T) {
		pubCreate(t, s, key, map[string]any{"event": strings.Repeat("a", 128)})
		pubCreate(t, s, key, map[string]any{"event": "A_z_0_9"})
		pubCreate(t, s, key, map[string]any{"event": "_"})
		pubCreate(t, s, key, map[string]any{"event": "x", "visitor_id": strings.Repeat("é", 256)})
		pubCreate(t, s, key, map[string]any{"event": "x", "visitor_id": "v"})
		pubCreate(t, s, key, map[string]any{"event": "x", "properties": map[string]any{}})
		pubCreate(t, s, key, map[string]any{"event": "x", "properties": pubNest(16)})
		pubCreate(t, s, key, `{"event":"x","properties":`+pubPropsOfSize(32768)+`}`)
		pubCreate(t, s, key, " \n\t{ \"event\" : \"x\" , \"properties\" : { \"a\" : [ 1 , 2 ] } } \n")
		pubCreate(t, s, key, `{"event":"x","properties":{"amount":0.01,"k":"\ud83d\ude00"}}`)
		pubCreate(t, s, key, `{"event":"\u0061bc"}`)
	})
}

// pubNest returns a properties value spanning n object levels.
func pubNest(n int) map[string]any {
	m := map[string]any{"leaf": 1}
	for i := 1; i < n; i++ {
		m = map[string]any{"n": m}
	}
	return m
}

// pubPropsOfSize returns a compact JSON object of exactly n bytes.
func pubPropsOfSize(n int) string {
	const head = `{"pad":"`
	const tail = `"}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

func TestCreateEventBadRequest(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "bad", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	long := strings.Repeat("a", 129)
	cases := []struct {
		name, body, field, msg string
		exact                  bool
	}{
		{"event missing", `{"visitor_id":"v"}`, "event", "required", false},
		{"event null", `{"event":null}`, "event", "required", false},
		{"event number", `{"event":5}`, "event", "string", false},
		{"event object", `{"event":{"a":1}}`, "event", "string", false},
		{"event empty", `{"event":""}`, "event", pubMsgSpecName, false},
		{"event 129 chars", `{"event":"` + long + `"}`, "event", pubMsgSpecName, false},
		{"event dash", `{"event":"sign-up"}`, "event", pubMsgSpecName, true},
		{"event space", `{"event":"sign up"}`, "event", pubMsgSpecName, true},
		{"event dot", `{"event":"page.view"}`, "event", pubMsgSpecName, true},
		{"event unicode", `{"event":"café"}`, "event", pubMsgSpecName, true},
		{"event escaped newline", `{"event":"a\nb"}`, "event", pubMsgSpecName, true},
		{"event escaped dash", `{"event":"a\u002db"}`, "event", pubMsgSpecName, true},
		{"visitor number", `{"event":"a","visitor_id":5}`, "visitor_id", "string", false},
		{"visitor bool", `{"event":"a","visitor_id":true}`, "visitor_id", "string", false},
		{"visitor object", `{"event":"a","visitor_id":{}}`, "visitor_id", "string", false},
		{"visitor array", `{"event":"a","visitor_id":["v"]}`, "visitor_id", "string", false},
		{"visitor empty", `{"event":"a","visitor_id":""}`, "visitor_id", "", false},
		{"visitor 257", `{"event":"a","visitor_id":"` + strings.Repeat("v", 257) + `"}`, "visitor_id", "", false},
		{"properties array", `{"event":"a","properties":[1]}`, "properties", "object", false},
		{"properties string", `{"event":"a","properties":"x"}`, "properties", "object", false},
		{"properties number", `{"event":"a","properties":1}`, "properties", "object", false},
		{"properties bool", `{"event":"a","properties":false}`, "properties", "object", false},
		{"properties over 32 KiB", `{"event":"a","properties":` + pubPropsOfSize(32769) + `}`, "properties", "", false},
		{"properties depth 17", `{"event":"a","properties":` + string(pubMarshal(t, pubNest(17))) + `}`, "properties", "", false},
		{"properties deep arrays", `{"event":"a","properties":{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`, "properties", "", false},
		{"properties duplicate key", `{"event":"a","properties":{"k":1,"k":2}}`, "properties", "duplicate", false},
		{"properties nested duplicate key", `{"event":"a","properties":{"o":{"k":1,"j":0,"k":2}}}`, "properties", "duplicate", false},
		{"duplicate event", `{"event":"a","event":"b"}`, "event", "duplicate", false},
		{"duplicate timestamp", `{"event":"a","timestamp":"2025-01-01T00:00:00Z","timestamp":"2025-01-01T00:00:00Z"}`, "timestamp", "duplicate", false},
		{"duplicate unknown", `{"event":"a","x":1,"x":1}`, "x", "duplicate", false},
		{"escaped duplicate", `{"event":"a","ev\u0065nt":"a"}`, "event", "duplicate", false},
		{"timestamp words", `{"event":"a","timestamp":"yesterday"}`, "timestamp", "ISO 8601", false},
		{"timestamp empty", `{"event":"a","timestamp":""}`, "timestamp", "", false},
		{"timestamp number", `{"event":"a","timestamp":1718447400}`, "timestamp", "string", false},
		{"timestamp month 13", `{"event":"a","timestamp":"2025-13-01T00:00:00Z"}`, "timestamp", "", false},
		{"timestamp June 31", `{"event":"a","timestamp":"2025-06-31T00:00:00Z"}`, "timestamp", "", false},
		{"timestamp Feb 29 2025", `{"event":"a","timestamp":"2025-02-29T00:00:00Z"}`, "timestamp", "", false},
		{"timestamp hour 25", `{"event":"a","timestamp":"2025-06-15T25:00:00Z"}`, "timestamp", "", false},
		{"timestamp bad zone", `{"event":"a","timestamp":"2025-06-15T10:00:00+2"}`, "timestamp", "", false},
		{"timestamp trailing", `{"event":"a","timestamp":"2025-06-15T10:00:00Zjunk"}`, "timestamp", "", false},
		{"timestamp slashes", `{"event":"a","timestamp":"2025/06/15 10:00:00"}`, "timestamp", "", false},
		{"timestamp before 1970", `{"event":"a","timestamp":"1969-12-31T23:59:59Z"}`, "timestamp", "", false},
		{"malformed missing value", `{"event":`, "body", "", false},
		{"malformed unquoted key", `{event:"a"}`, "body", "", false},
		{"malformed single quotes", `{'event':'a'}`, "body", "", false},
		{"malformed trailing comma", `{"event":"a",}`, "body", "", false},
		{"malformed text", `not json`, "body", "", false},
		{"malformed leading zero", `{"event":"a","properties":{"n":01}}`, "body", "", false},
		{"malformed NaN", `{"event":"a","properties":{"n":NaN}}`, "body", "", false},
		{"lone surrogate", `{"event":"a","properties":{"s":"\ud800"}}`, "body", "", false},
		{"control char in string", "{\"event\":\"a\",\"properties\":{\"s\":\"a\x01b\"}}", "body", "", false},
		{"empty body", ``, "body", "", false},
		{"array body", `[{"event":"a"}]`, "body", "", false},
		{"string body", `"event"`, "body", "", false},
		{"null body", `null`, "body", "", false},
		{"trailing object", `{"event":"a"}{"event":"b"}`, "body", "", false},
		{"trailing garbage", `{"event":"a"} x`, "body", "", false},
		{"trailing comma", `{"event":"a"},`, "body", "", false},
		{"invalid UTF-8 in value", "{\"event\":\"a\",\"properties\":{\"s\":\"\xff\xfe\"}}", "body", "", false},
		{"invalid UTF-8 in name", "{\"event\":\"a\xc3\"}", "body", "", false},
		{"invalid UTF-8 in key", "{\"event\":\"a\",\"\xe2\x28\xa1\":1}", "body", "", false},
		{"overlong UTF-8", "{\"event\":\"a\",\"properties\":{\"s\":\"\xc0\xaf\"}}", "body", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Do(t, "POST", s.Public+"/events", key, tc.body)
			e := pubWantDetail(t, r, 400, "bad_request", tc.field, tc.msg)
			if tc.exact && e.Details[tc.field] != tc.msg {
				t.Fatalf("details[%q] = %q, want exactly %q", tc.field, e.Details[tc.field], tc.msg)
			}
			if r.Header.Get("X-RateLimit-Limit") == "" {
				t.Fatalf("400 without X-RateLimit-Limit")
			}
		})
	}
	t.Run("several problems reported together", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/events", key, `{"event":"a b","visitor_id":7,"properties":[],"timestamp":"x"}`)
		e := pubWantErr(t, r, 400, "bad_request", "")
		for _, f := range []string{"event", "visitor_id", "properties", "timestamp"} {
			if e.Details[f] == "" {
				t.Fatalf("details lack %s: %s", f, r.Body)
			}
		}
	})
	if l := pubList(t, s, key, ""); l.Pagination.Total != 0 {
		t.Fatalf("refused bodies stored %d events: %+v", l.Pagination.Total, l.Data)
	}
}

func TestCreateEventValidation(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "validation", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	other := s.Project(t, "other", "", pubBigLimits)
	otherKey := s.Key(t, other, "secret", "live")

	t.Run("amount", func(t *testing.T) {
		for _, v := range []string{`0`, `-5`, `-0.01`, `0.0`, `0e10`, `-1e3`, `"10"`, `true`, `{}`, `[1]`, `null`} {
			r := Do(t, "POST", s.Public+"/events", key, `{"event":"purchase_x","properties":{"amount":`+v+`}}`)
			e := pubWantDetail(t, r, 422, "validation_error", "properties.amount", pubMsgPositive)
			if e.Details["properties.amount"] != pubMsgPositive {
				t.Fatalf("amount %s: details %q, want exactly %q", v, e.Details["properties.amount"], pubMsgPositive)
			}
		}
		for _, v := range []string{`0.01`, `1`, `1e3`, `49.99`, `1e-300`, `123456789012345678901234567890`} {
			pubCreate(t, s, key, `{"event":"purchase_x","properties":{"amount":`+v+`}}`)
		}
		// Only the top-level amount is checked.
		pubCreate(t, s, key, `{"event":"purchase_x","properties":{"order":{"amount":-1}}}`)
		// The 422 checks run after the 400 checks: a body with both answers 400.
		r := Do(t, "POST", s.Public+"/events", key, `{"event":"bad-name","properties":{"amount":0}}`)
		pubWantDetail(t, r, 400, "bad_request", "event", pubMsgSpecName)
		// amount and future timestamp together: both named.
		r = Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "x", "properties": map[string]any{"amount": 0},
			"timestamp": pubISO(time.Now().Add(3 * time.Hour))})
		e := pubWantErr(t, r, 422, "validation_error", "")
		if e.Details["properties.amount"] == "" || e.Details["timestamp"] == "" {
			t.Fatalf("details %v", e.Details)
		}
	})

	def := map[string]any{
		"name": "checkout", "display_name": "Checkout", "category": "commerce",
		"properties": []any{
			map[string]any{"name": "order_id", "type": "string", "required": true},
			map[string]any{"name": "total", "type": "number", "required": true},
			map[string]any{"name": "gift", "type": "boolean", "required": false},
			map[string]any{"name": "paid_at", "type": "datetime", "required": false},
			map[string]any{"name": "page", "type": "url", "required": false},
		},
	}
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/event-definitions", def)
	wantStatus(t, r, 201)

	t.Run("definition", func(t *testing.T) {
		ok := `"order_id":"o1","total":10`
		for _, tc := range []struct {
			name, props string
			want        map[string]string // detail key -> substring
		}{
			{"no properties", ``, map[string]string{"properties.order_id": "required", "properties.total": "required"}},
			{"missing order_id", `"total":1`, map[string]string{"properties.order_id": "required"}},
			{"null order_id", `"order_id":null,"total":1`, map[string]string{"properties.order_id": "required"}},
			{"order_id number", `"order_id":5,"total":1`, map[string]string{"properties.order_id": "string"}},
			{"total string", `"order_id":"o","total":"10"`, map[string]string{"properties.total": "number"}},
			{"total bool", `"order_id":"o","total":true`, map[string]string{"properties.total": "number"}},
			{"gift string", ok + `,"gift":"yes"`, map[string]string{"properties.gift": "boolean"}},
			{"gift number", ok + `,"gift":1`, map[string]string{"properties.gift": "boolean"}},
			{"paid_at words", ok + `,"paid_at":"yesterday"`, map[string]string{"properties.paid_at": ""}},
			{"paid_at date only", ok + `,"paid_at":"2025-06-15"`, map[string]string{"properties.paid_at": ""}},
			{"paid_at no zone", ok + `,"paid_at":"2025-06-15T10:00:00"`, map[string]string{"properties.paid_at": ""}},
			{"paid_at number", ok + `,"paid_at":1718447400`, map[string]string{"properties.paid_at": ""}},
			{"page relative", ok + `,"page":"/pricing"`, map[string]string{"properties.page": "URL"}},
			{"page no scheme", ok + `,"page":"example.com/pricing"`, map[string]string{"properties.page": "URL"}},
			{"page ftp", ok + `,"page":"ftp://example.com/f"`, map[string]string{"properties.page": "URL"}},
			{"page mailto", ok + `,"page":"mailto:a@example.com"`, map[string]string{"properties.page": "URL"}},
			{"page number", ok + `,"page":5`, map[string]string{"properties.page": "URL"}},
			{"several", `"order_id":1,"total":"x","gift":"n","amount":0`, map[string]string{
				"properties.order_id": "string", "properties.total": "number", "properties.gift": "boolean", "properties.amount": pubMsgPositive}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := `{"event":"checkout","properties":{` + tc.props + `}}`
				if tc.props == "" {
					body = `{"event":"checkout"}`
				}
				r := Do(t, "POST", s.Public+"/events", key, body)
				e := pubWantErr(t, r, 422, "validation_error", "")
				if len(e.Details) != len(tc.want) {
					t.Fatalf("details %v, want keys of %v", e.Details, tc.want)
				}
				for k, sub := range tc.want {
					if !strings.Contains(e.Details[k], sub) {
						t.Fatalf("details[%q] = %q, want it to contain %q (%s)", k, e.Details[k], sub, r.Body)
					}
				}
			})
		}
		for _, props := range []string{
			ok,
			ok + `,"gift":false,"paid_at":"2025-06-15T10:00:00Z","page":"https://example.com/p?q=1"`,
			ok + `,"paid_at":"2025-06-15T10:00:00.123+02:00","page":"http://localhost:8080/"`,
			ok + `,"gift":null,"paid_at":null,"page":null`,
			`"order_id":"","total":-3.5`, // number may be negative; amount is a different property
			ok + `,"extra":"allowed","nested":{"order_id":5}`,
		} {
			pubCreate(t, s, key, `{"event":"checkout","properties":{`+props+`}}`)
		}
		// Another event name, and another project, are not checked.
		pubCreate(t, s, key, `{"event":"checkout_started"}`)
		pubCreate(t, s, otherKey, `{"event":"checkout"}`)
		// Batch entries are checked alone.
		b := pubPostBatch(t, s, key, map[string]any{"events": []any{
			map[string]any{"event": "checkout", "properties": map[string]any{"order_id": "o", "total": 1}},
			map[string]any{"event": "checkout", "properties": map[string]any{"total": "1"}},
		}})
		if b.Accepted != 1 || b.Results[1].Error != "validation_error" ||
			!strings.Contains(b.Results[1].Details["properties.order_id"], "required") ||
			!strings.Contains(b.Results[1].Details["properties.total"], "number") {
			t.Fatalf("batch %+v", b)
		}
	})

	t.Run("definition changes apply at once", func(t *testing.T) {
		r := s.AdminDo(t, "PUT", "/admin/v1/projects/"+p+"/event-definitions/checkout", map[string]any{
			"name": "checkout", "display_name": "Checkout", "category": "commerce",
			"properties": []any{map[string]any{"name": "coupon", "type": "string", "required": true}},
		})
		wantStatus(t, r, 200)
		pubCreate(t, s, key, `{"event":"checkout","properties":{"coupon":"X"}}`)
		pubWantDetail(t, Do(t, "POST", s.Public+"/events", key, `{"event":"checkout","properties":{"order_id":"o","total":1}}`),
			422, "validation_error", "properties.coupon", "required")
		wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/projects/"+p+"/event-definitions/checkout", nil), 204)
		pubCreate(t, s, key, `{"event":"checkout"}`)
	})
}

func TestContentTypeAndSize(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "sizes", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	body := []byte(`{"event":"ct"}`)
	batchBody := []byte(`{"events":[{"event":"ct"}]}`)

	t.Run("content types", func(t *testing.T) {
		for _, tc := range []struct {
			ct     string
			status int
		}{
			{"", 201},
			{"application/json", 201},
			{"application/json; charset=utf-8", 201},
			{"Application/JSON", 201},
			{"text/plain", 201},
			{"text/plain;charset=UTF-8", 201},
			{"text/xml", 415},
			{"application/xml", 415},
			{"application/x-www-form-urlencoded", 415},
			{"multipart/form-data; boundary=x", 415},
			{"text/html", 415},
			{"application/jsonp", 415},
		} {
			t.Run(tc.ct, func(t *testing.T) {
				var hs []string
				if tc.ct != "" {
					hs = append(hs, "Content-Type: "+tc.ct)
				}
				for _, target := range []struct {
					path string
					body []byte
				}{{"/events", body}, {"/events/batch", batchBody}} {
					r := pubMustDo(t, "POST", s.Public+target.path, key, target.body, hs...)
					if tc.status == 415 {
						pubWantErr(t, r, 415, "unsupported_media_type", "")
						continue
					}
					wantStatus(t, r, 201)
				}
			})
		}
	})

	t.Run("single body limit 1 MiB", func(t *testing.T) {
		// Whitespace padding keeps the event valid, so only the size matters.
		at := append(append([]byte{}, body...), strings.Repeat(" ", 1<<20-len(body))...)
		pubWantCreated(t, pubMustDo(t, "POST", s.Public+"/events", key, at, "Content-Type: application/json"))
		over := append(at, ' ')
		r := pubMustDo(t, "POST", s.Public+"/events", key, over, "Content-Type: application/json")
		pubWantErr(t, r, 413, "payload_too_large", "")
		if r.Header.Get("X-RateLimit-Limit") == "" {
			t.Fatalf("413 of an authenticated request without rate-limit headers")
		}
		r = pubMustDo(t, "POST", s.Public+"/events", key, append(over, strings.Repeat(" ", 2<<20)...), "Content-Type: application/json")
		pubWantErr(t, r, 413, "payload_too_large", "")
	})

	t.Run("batch body limit 5 MiB", func(t *testing.T) {
		at := append(append([]byte{}, batchBody...), strings.Repeat(" ", 5<<20-len(batchBody))...)
		r := pubMustDo(t, "POST", s.Public+"/events/batch", key, at, "Content-Type: application/json")
		wantStatus(t, r, 201)
		// Past the 16 MiB that the server reads at all, a body is refused on
		// its Content-Length alone, before it is sent (docs/decisions.md).
		for _, n := range []int{16<<20 + 1, 1 << 30} {
			raw := pubRawDo(t, s, "POST", "/events/batch", key, "", "Content-Type: application/json", "Content-Length: "+strconv.Itoa(n))
			if raw.status(t) != 413 {
				t.Fatalf("Content-Length %d: %s %s", n, raw.StatusLine, raw.Body)
			}
			var e pubErrorResp
			pubStrictJSON(t, []byte(raw.Body), &e)
			if e.Error != "payload_too_large" {
				t.Fatalf("Content-Length %d: %s", n, raw.Body)
			}
			if _, ok := raw.header("X-Request-Id"); !ok {
				t.Fatalf("413 without X-Request-Id: %q", raw.Lines)
			}
		}
	})

	t.Run("client sending a whole over-limit batch reads the 413", func(t *testing.T) {
		// A client that writes the whole body (as every HTTP library does)
		// must be able to read the 413, not a connection reset.
		over := append(append([]byte{}, batchBody...), strings.Repeat(" ", 5<<20+1-len(batchBody))...)
		for i := 0; i < 30; i++ { // a reset is a race the client loses often but not always
			r, err := pubDoRaw("POST", s.Public+"/events/batch", key, over, "Content-Type: application/json")
			if err != nil {
				t.Fatalf("attempt %d: POST of a 5 MiB + 1 batch: %v (want a readable 413)", i, err)
			}
			pubWantErr(t, r, 413, "payload_too_large", "")
		}
		// The same for the single route, whose own limit is 1 MiB.
		r, err := pubDoRaw("POST", s.Public+"/events", key, over, "Content-Type: application/json")
		if err != nil {
			t.Fatalf("POST /events of 5 MiB + 1: %v (want a readable 413)", err)
		}
		pubWantErr(t, r, 413, "payload_too_large", "")
	})

	t.Run("batch of 100 large events", func(t *testing.T) {
		// A 2 MiB body is fine for a batch (realistic: 100 events of ~20 KiB).
		var sb strings.Builder
		sb.WriteString(`{"events":[`)
		for i := 0; i < 100; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`{"event":"big","properties":` + pubPropsOfSize(20000) + `}`)
		}
		sb.WriteString(`]}`)
		b := pubPostBatch(t, s, key, sb.String())
		if b.Accepted != 100 {
			t.Fatalf("accepted %d", b.Accepted)
		}
	})

	t.Run("gzip", func(t *testing.T) {
		c := pubWantCreated(t, pubMustDo(t, "POST", s.Public+"/events", key, pubGzip(t, []byte(`{"event":"zipped","visitor_id":"z"}`)),
			"Content-Type: application/json", "Content-Encoding: gzip"))
		if e := pubGetEvent(t, s, key, c.ID); e.Event != "zipped" || e.VisitorID == nil || *e.VisitorID != "z" {
			t.Fatalf("stored %+v", e)
		}
		r := pubMustDo(t, "POST", s.Public+"/events/batch", key, pubGzip(t, []byte(`{"events":[{"event":"zipped"},{"event":"zipped"}]}`)),
			"Content-Type: application/json", "Content-Encoding: gzip")
		wantStatus(t, r, 201)
		if b := pubDecodeBatch(t, r); b.Accepted != 2 {
			t.Fatalf("batch %+v", b)
		}
		// Limits apply to the decoded size: a small gzip of a large body.
		bomb := pubGzip(t, append(append([]byte{}, body...), strings.Repeat(" ", 1<<20)...))
		if len(bomb) > 1<<16 {
			t.Fatalf("bomb is %d bytes compressed", len(bomb))
		}
		pubWantErr(t, pubMustDo(t, "POST", s.Public+"/events", key, bomb, "Content-Type: application/json", "Content-Encoding: gzip"),
			413, "payload_too_large", "")
		bigBomb := pubGzip(t, append(append([]byte{}, batchBody...), strings.Repeat(" ", 8<<20)...))
		pubWantErr(t, pubMustDo(t, "POST", s.Public+"/events/batch", key, bigBomb, "Content-Type: application/json", "Content-Encoding: gzip"),
			413, "payload_too_large", "")
		// A batch decoding to just under 5 MiB is fine.
		fits := pubGzip(t, append(append([]byte{}, batchBody...), strings.Repeat(" ", 4<<20)...))
		wantStatus(t, pubMustDo(t, "POST", s.Public+"/events/batch", key, fits, "Content-Type: application/json", "Content-Encoding: gzip"), 201)

		zipped := pubGzip(t, body)
		for name, b := range map[string][]byte{
			"not gzip":  []byte(`{"event":"plain"}`),
			"truncated": zipped[:len(zipped)-6],
			"garbage":   append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, []byte("garbage garbage")...),
			"empty":     {},
		} {
			r := pubMustDo(t, "POST", s.Public+"/events", key, b, "Content-Type: application/json", "Content-Encoding: gzip")
			pubWantErr(t, r, 400, "bad_request", "")
			_ = name
		}
		// gzip of malformed JSON is a JSON error, not a gzip one.
		r = pubMustDo(t, "POST", s.Public+"/events", key, pubGzip(t, []byte(`{"event":`)), "Content-Type: application/json", "Content-Encoding: gzip")
		pubWantDetail(t, r, 400, "bad_request", "body", "")
		// Unknown encodings are refused.
		r = pubMustDo(t, "POST", s.Public+"/events", key, body, "Content-Type: application/json", "Content-Encoding: br")
		pubWantErr(t, r, 415, "unsupported_media_type", "")
	})
}

// TestIdempotencyByDay: with no filter (--idempotency-filter-keys -1)
// every key is kept by day, and a repeat is answered as with the filter,
// before and after a restart, with the filter or without.
func TestIdempotencyByDay(t *testing.T) {
	s := Start(t, "--idempotency-filter-keys", "-1")
	p := s.Project(t, "idem", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	body := map[string]any{"event": "idem_a", "visitor_id": "v"}
	c1 := pubWantCreated(t, Do(t, "POST", s.Public+"/events", key, body, "Idempotency-Key: key-1"))
	replayed := func(phase string) {
		t.Helper()
		r := Do(t, "POST", s.Public+"/events", key, body, "Idempotency-Key: key-1")
		if c := pubWantCreated(t, r); c != c1 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: %+v (replayed %q), original %+v", phase, c, r.Header.Get("Idempotent-Replayed"), c1)
		}
		pubWantErr(t, Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "idem_b"}, "Idempotency-Key: key-1"), 409, "idempotency_conflict", "")
	}
	replayed("by day")
	if n := metricValue(t, string(s.AdminDo(t, "GET", "/metrics", nil).Body), "eventd_idempotency_filter_keys"); n != 0 {
		t.Errorf("eventd_idempotency_filter_keys %v without a filter", n)
	}
	s.Restart()
	replayed("restarted")
	s.Args = []string{"--idempotency-filter-keys", "1000"}
	s.Restart()
	replayed("restarted with a filter")
	if n := metricValue(t, string(s.AdminDo(t, "GET", "/metrics", nil).Body), "eventd_idempotency_keys_by_day_total"); n != 0 {
		t.Errorf("eventd_idempotency_keys_by_day_total %v before the filter is full", n)
	}

	// Past the filter's smallest table (4,096 entries) keys are kept by
	// day, counted, and found as before.
	type batchReply struct {
		Results []struct{ ID, Status string }
	}
	send := func(events []map[string]any) batchReply {
		t.Helper()
		var out batchReply
		r := Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": events})
		if r.Status != 201 || json.Unmarshal(r.Body, &out) != nil || len(out.Results) != len(events) {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		return out
	}
	ids := map[string]string{}
	for b := range 45 {
		events := make([]map[string]any, 100)
		for i := range events {
			events[i] = map[string]any{"event": "idem_full", "idempotency_key": fmt.Sprintf("full-%d-%d", b, i)}
		}
		out := send(events)
		ids[fmt.Sprintf("full-%d-0", b)], ids[fmt.Sprintf("full-%d-99", b)] = out.Results[0].ID, out.Results[99].ID
	}
	if n := metricValue(t, string(s.AdminDo(t, "GET", "/metrics", nil).Body), "eventd_idempotency_keys_by_day_total"); n < 1 || n > 1500 {
		t.Errorf("eventd_idempotency_keys_by_day_total %v after 4,500 keys in a filter of 4,096 entries, want 1-1,500", n)
	}
	for _, k := range []string{"full-0-0", "full-44-99"} {
		if out := send([]map[string]any{{"event": "idem_full", "idempotency_key": k}}); out.Results[0].ID != ids[k] {
			t.Errorf("%s sent again: %+v, want its first id %s", k, out.Results[0], ids[k])
		}
	}
	if n := pubList(t, s, key, "event=idem_full").Pagination.Total; n != 4500 {
		t.Errorf("%d idem_full events stored, want 4,500", n)
	}
}

func TestIdempotency(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "idem", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	count := func(t *testing.T, name string) int {
		t.Helper()
		return pubList(t, s, key, "event="+name).Pagination.Total
	}

	t.Run("repeat answers the original", func(t *testing.T) {
		body := map[string]any{"event": "idem_a", "visitor_id": "v", "properties": map[string]any{"n": 1}}
		r1 := Do(t, "POST", s.Public+"/events", key, body, "Idempotency-Key: key-1")
		c1 := pubWantCreated(t, r1)
		if v := r1.Header.Get("Idempotent-Replayed"); v != "" {
			t.Fatalf("first request has Idempotent-Replayed: %s", v)
		}
		for i := 0; i < 3; i++ {
			r := Do(t, "POST", s.Public+"/events", key, body, "Idempotency-Key: key-1")
			c := pubWantCreated(t, r)
			if c != c1 {
				t.Fatalf("replay %+v, original %+v", c, c1)
			}
			if v := r.Header.Get("Idempotent-Replayed"); v != "true" {
				t.Fatalf("Idempotent-Replayed %q", v)
			}
		}
		// Insignificant whitespace does not change the body.
		r := Do(t, "POST", s.Public+"/events", key, `{ "event" : "idem_a", "visitor_id":"v", "properties": { "n" : 1 } }`, "Idempotency-Key: key-1")
		if c := pubWantCreated(t, r); c.ID != c1.ID {
			t.Fatalf("whitespace variant got a new id")
		}
		if n := count(t, "idem_a"); n != 1 {
			t.Fatalf("%d events stored, want 1", n)
		}
		// The replayed timestamp is the original's even without one in the body.
		r2 := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "idem_b"}, "Idempotency-Key: key-2")
		c2 := pubWantCreated(t, r2)
		time.Sleep(5 * time.Millisecond)
		r3 := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "idem_b"}, "Idempotency-Key: key-2")
		if c3 := pubWantCreated(t, r3); c3 != c2 {
			t.Fatalf("replay %+v, original %+v", c3, c2)
		}
		// The replayed answer survives a restart.
		s.Restart()
		r4 := Do(t, "POST", s.Public+"/events", key, body, "Idempotency-Key: key-1")
		if c := pubWantCreated(t, r4); c != c1 || r4.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("after restart %+v (replayed %q), original %+v", c, r4.Header.Get("Idempotent-Replayed"), c1)
		}
		if n := count(t, "idem_a"); n != 1 {
			t.Fatalf("%d events stored, want 1", n)
		}
		// The filter that finds the records was rebuilt at the start.
		if n := metricValue(t, string(s.AdminDo(t, "GET", "/metrics", nil).Body), "eventd_idempotency_filter_keys"); n != 2 {
			t.Errorf("eventd_idempotency_filter_keys %v after a restart, want 2", n)
		}
	})

	t.Run("same key other body conflicts", func(t *testing.T) {
		pubCreate(t, s, key, map[string]any{"event": "idem_c", "properties": map[string]any{"n": 1}}, "Idempotency-Key: key-3")
		for _, b := range []any{
			map[string]any{"event": "idem_c", "properties": map[string]any{"n": 2}},
			map[string]any{"event": "idem_d", "properties": map[string]any{"n": 1}},
			map[string]any{"event": "idem_c", "visitor_id": "v", "properties": map[string]any{"n": 1}},
			map[string]any{"event": "idem_c", "properties": map[string]any{"n": 1}, "timestamp": "2025-01-01T00:00:00Z"},
		} {
			r := Do(t, "POST", s.Public+"/events", key, b, "Idempotency-Key: key-3")
			pubWantErr(t, r, 409, "idempotency_conflict", "")
			if r.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("409 with Idempotent-Replayed")
			}
		}
		if n := count(t, "idem_c") + count(t, "idem_d"); n != 1 {
			t.Fatalf("%d events stored, want 1", n)
		}
	})

	t.Run("other key other event", func(t *testing.T) {
		a := pubCreate(t, s, key, map[string]any{"event": "idem_e"}, "Idempotency-Key: key-4")
		b := pubCreate(t, s, key, map[string]any{"event": "idem_e"}, "Idempotency-Key: key-5")
		c := pubCreate(t, s, key, map[string]any{"event": "idem_e"})
		d := pubCreate(t, s, key, map[string]any{"event": "idem_e"})
		if len(map[string]bool{a.ID: true, b.ID: true, c.ID: true, d.ID: true}) != 4 {
			t.Fatalf("ids not distinct")
		}
	})

	t.Run("key length", func(t *testing.T) {
		pubCreate(t, s, key, map[string]any{"event": "idem_len"}, "Idempotency-Key: "+strings.Repeat("k", 255))
		r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "idem_len"}, "Idempotency-Key: "+strings.Repeat("k", 256))
		e := pubWantErr(t, r, 400, "bad_request", "")
		if len(e.Details) != 1 {
			t.Fatalf("details %v", e.Details)
		}
		if n := count(t, "idem_len"); n != 1 {
			t.Fatalf("%d stored", n)
		}
	})

	t.Run("20 concurrent requests store one event", func(t *testing.T) {
		const n = 20
		var wg sync.WaitGroup
		type out struct {
			r   *Response
			err error
		}
		res := make([]out, n)
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				r, err := pubDoRaw("POST", s.Public+"/events", key, []byte(`{"event":"idem_race","properties":{"x":1}}`),
					"Content-Type: application/json", "Idempotency-Key: race-1")
				res[i] = out{r, err}
			}(i)
		}
		close(start)
		wg.Wait()
		ids := map[string]int{}
		replayed := 0
		for _, o := range res {
			if o.err != nil {
				t.Fatal(o.err)
			}
			c := pubWantCreated(t, o.r)
			ids[c.ID]++
			if o.r.Header.Get("Idempotent-Replayed") == "true" {
				replayed++
			}
		}
		if len(ids) != 1 {
			t.Fatalf("concurrent requests got %d ids: %v", len(ids), ids)
		}
		if replayed != n-1 {
			t.Fatalf("%d replayed, want %d", replayed, n-1)
		}
		if c := count(t, "idem_race"); c != 1 {
			t.Fatalf("%d events stored, want 1", c)
		}
		// And concurrent conflicting bodies: exactly one wins.
		var mu sync.Mutex
		statuses := map[int]int{}
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r, err := pubDoRaw("POST", s.Public+"/events", key, []byte(fmt.Sprintf(`{"event":"idem_race2","properties":{"x":%d}}`, i)),
					"Content-Type: application/json", "Idempotency-Key: race-2")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					statuses[-1]++
					return
				}
				statuses[r.Status]++
			}(i)
		}
		wg.Wait()
		if statuses[201] != 1 || statuses[409] != n-1 {
			t.Fatalf("statuses %v, want one 201 and %d 409", statuses, n-1)
		}
		if c := count(t, "idem_race2"); c != 1 {
			t.Fatalf("%d events stored, want 1", c)
		}
	})
}

func TestBatch(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "batch", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")

	t.Run("mixed results in input order", func(t *testing.T) {
		b := pubPostBatch(t, s, key, map[string]any{"events": []any{
			map[string]any{"event": "b_one", "visitor_id": "v1", "properties": map[string]any{"k": "v"}, "timestamp": "2025-05-01T00:00:00Z"},
			map[string]any{"event": "bad-name"},
			map[string]any{"event": "b_two", "properties": map[string]any{"amount": 0}},
			map[string]any{"event": "b_three"},
			5,
			map[string]any{"event": "b_four", "timestamp": pubISO(time.Now().Add(2 * time.Hour))},
			map[string]any{"event": "b_five", "unknown": true},
			map[string]any{"visitor_id": "v"},
		}})
		if b.Accepted != 3 || b.Rejected != 5 || len(b.Results) != 8 {
			t.Fatalf("batch %+v", b)
		}
		want := []struct{ status, code, field string }{
			{"accepted", "", ""},
			{"rejected", "bad_request", "event"},
			{"rejected", "validation_error", "properties.amount"},
			{"accepted", "", ""},
			{"rejected", "bad_request", ""},
			{"rejected", "validation_error", "timestamp"},
			{"accepted", "", ""},
			{"rejected", "bad_request", "event"},
		}
		for i, w := range want {
			res := b.Results[i]
			if res.Status != w.status || res.Error != w.code {
				t.Fatalf("result %d = %+v, want %+v", i, res, w)
			}
			if w.field != "" && res.Details[w.field] == "" {
				t.Fatalf("result %d details %v lack %s", i, res.Details, w.field)
			}
		}
		if b.Results[1].Details["event"] != pubMsgSpecName {
			t.Fatalf("details.event %q", b.Results[1].Details["event"])
		}
		if b.Results[2].Details["properties.amount"] != pubMsgPositive {
			t.Fatalf("details %v", b.Results[2].Details)
		}
		e := pubGetEvent(t, s, key, b.Results[0].ID)
		if e.Event != "b_one" || e.VisitorID == nil || *e.VisitorID != "v1" || e.Timestamp != "2025-05-01T00:00:00.000Z" || string(e.Properties) != `{"k":"v"}` {
			t.Fatalf("entry 0 stored as %+v %s", e, e.Properties)
		}
		if e := pubGetEvent(t, s, key, b.Results[3].ID); e.Event != "b_three" {
			t.Fatalf("entry 3 stored as %+v", e)
		}
		if e := pubGetEvent(t, s, key, b.Results[6].ID); e.Event != "b_five" {
			t.Fatalf("entry 6 stored as %+v", e)
		}
		// Ids grow in input order.
		if !(b.Results[0].ID < b.Results[3].ID && b.Results[3].ID < b.Results[6].ID) {
			t.Fatalf("ids not in input order: %v %v %v", b.Results[0].ID, b.Results[3].ID, b.Results[6].ID)
		}
	})

	t.Run("all rejected is still 201", func(t *testing.T) {
		b := pubPostBatch(t, s, key, map[string]any{"events": []any{map[string]any{"event": ""}, map[string]any{"event": "x", "properties": []any{}}}})
		if b.Accepted != 0 || b.Rejected != 2 {
			t.Fatalf("batch %+v", b)
		}
	})

	t.Run("100 accepted, all readable", func(t *testing.T) {
		var evs []any
		base := time.Date(2025, 4, 1, 12, 0, 0, 0, time.UTC)
		for i := 0; i < 100; i++ {
			evs = append(evs, map[string]any{"event": "b_hundred", "visitor_id": fmt.Sprintf("v%03d", i),
				"timestamp": pubISO(base.Add(time.Duration(i) * time.Second)), "properties": map[string]any{"i": i}})
		}
		b := pubPostBatch(t, s, key, map[string]any{"events": evs})
		if b.Accepted != 100 || b.Rejected != 0 {
			t.Fatalf("accepted %d rejected %d", b.Accepted, b.Rejected)
		}
		seen := map[string]bool{}
		for i, res := range b.Results {
			if seen[res.ID] {
				t.Fatalf("duplicate id %s", res.ID)
			}
			seen[res.ID] = true
			e := pubGetEvent(t, s, key, res.ID)
			if *e.VisitorID != fmt.Sprintf("v%03d", i) || string(e.Properties) != fmt.Sprintf(`{"i":%d}`, i) ||
				e.Timestamp != pubISO(base.Add(time.Duration(i)*time.Second)) {
				t.Fatalf("entry %d stored as %+v %s", i, e, e.Properties)
			}
		}
		l := pubList(t, s, key, "event=b_hundred&limit=100")
		if l.Pagination.Total != 100 || len(l.Data) != 100 {
			t.Fatalf("list total %d len %d", l.Pagination.Total, len(l.Data))
		}
		for i, it := range l.Data {
			if it.ID != b.Results[99-i].ID {
				t.Fatalf("list item %d is %s, want %s", i, it.ID, b.Results[99-i].ID)
			}
		}
	})

	t.Run("bad batch bodies", func(t *testing.T) {
		one := map[string]any{"event": "x"}
		var hundredOne []any
		for i := 0; i < 101; i++ {
			hundredOne = append(hundredOne, one)
		}
		for _, tc := range []struct {
			name  string
			body  any
			field string
		}{
			{"empty array", `{"events":[]}`, "events"},
			{"101 events", map[string]any{"events": hundredOne}, "events"},
			{"missing events", `{}`, "events"},
			{"other field only", `{"event":"x"}`, "events"},
			{"events null", `{"events":null}`, "events"},
			{"events object", `{"events":{"event":"x"}}`, "events"},
			{"events string", `{"events":"x"}`, "events"},
			{"duplicate events", `{"events":[{"event":"x"}],"events":[{"event":"y"}]}`, "events"},
			{"bad sent_at", `{"events":[{"event":"x"}],"sent_at":"nope"}`, "sent_at"},
			{"array body", `[{"event":"x"}]`, "body"},
			{"malformed", `{"events":[{"event":"x"}`, "body"},
			{"malformed entry", `{"events":[{"event":}]}`, "body"},
			{"trailing data", `{"events":[{"event":"x"}]} []`, "body"},
			{"invalid UTF-8", "{\"events\":[{\"event\":\"x\",\"properties\":{\"a\":\"\xff\"}}]}", "body"},
			{"empty body", ``, "body"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := Do(t, "POST", s.Public+"/events/batch", key, tc.body)
				pubWantDetail(t, r, 400, "bad_request", tc.field, "")
			})
		}
		if n := pubList(t, s, key, "event=x").Pagination.Total; n != 0 {
			t.Fatalf("refused batches stored %d events", n)
		}
	})

	t.Run("entry problems", func(t *testing.T) {
		b := pubPostBatch(t, s, key, map[string]any{"events": []any{
			`not an object`,
			nil,
			map[string]any{"event": "ok", "properties": pubNest(17)},
			map[string]any{"event": "ok", "visitor_id": 1},
			map[string]any{"event": "ok", "timestamp": "soon"},
			map[string]any{"event": "ok", "idempotency_key": strings.Repeat("k", 256)},
			map[string]any{"event": "ok", "idempotency_key": 5},
			map[string]any{"event": "ok", "idempotency_key": ""},
		}})
		if b.Accepted != 0 {
			t.Fatalf("batch %+v", b)
		}
		for i, f := range map[int]string{2: "properties", 3: "visitor_id", 4: "timestamp", 5: "idempotency_key", 6: "idempotency_key", 7: "idempotency_key"} {
			if b.Results[i].Error != "bad_request" || b.Results[i].Details[f] == "" {
				t.Fatalf("entry %d: %+v, want details.%s", i, b.Results[i], f)
			}
		}
		// A duplicate key inside an entry is that entry's problem only.
		r := Do(t, "POST", s.Public+"/events/batch", key, `{"events":[{"event":"ok","event":"ok"},{"event":"dup_ok"}]}`)
		wantStatus(t, r, 201)
		bb := pubDecodeBatch(t, r)
		if bb.Accepted != 1 || bb.Results[0].Details["event"] == "" {
			t.Fatalf("batch %+v", bb)
		}
	})

	t.Run("sent_at applies to every entry", func(t *testing.T) {
		sent := time.Now().Add(-3 * time.Hour).Truncate(time.Millisecond)
		ts1, ts2 := sent.Add(-time.Minute), sent.Add(-2*time.Hour)
		before := time.Now().UnixMilli()
		b := pubPostBatch(t, s, key, map[string]any{"sent_at": pubISO(sent), "events": []any{
			map[string]any{"event": "b_skew", "timestamp": pubISO(ts1)},
			map[string]any{"event": "b_skew", "timestamp": pubISO(ts2), "sent_at": "ignored per entry"},
			map[string]any{"event": "b_skew"},
		}})
		after := time.Now().UnixMilli()
		if b.Accepted != 3 {
			t.Fatalf("batch %+v", b)
		}
		for i, ts := range []time.Time{ts1, ts2} {
			got := pubMustTime(t, pubGetEvent(t, s, key, b.Results[i].ID).Timestamp)
			lo, hi := ts.UnixMilli()+before-sent.UnixMilli(), ts.UnixMilli()+after-sent.UnixMilli()
			if got < lo || got > hi {
				t.Fatalf("entry %d timestamp %s outside [%s, %s]", i, pubMsText(got), pubMsText(lo), pubMsText(hi))
			}
		}
		if got := pubMustTime(t, pubGetEvent(t, s, key, b.Results[2].ID).Timestamp); got < before || got > after {
			t.Fatalf("entry without timestamp at %s, not the receipt", pubMsText(got))
		}
	})
}

func TestBatchIdempotency(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "batch-idem", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	count := func(name string) int { return pubList(t, s, key, "event="+name).Pagination.Total }

	b1 := pubPostBatch(t, s, key, map[string]any{"events": []any{
		map[string]any{"event": "bi_a", "idempotency_key": "k1"},
		map[string]any{"event": "bi_b", "idempotency_key": "k2", "properties": map[string]any{"n": 1}},
		map[string]any{"event": "bi_c"},
	}})
	if b1.Accepted != 3 {
		t.Fatalf("batch 1 %+v", b1)
	}
	b2 := pubPostBatch(t, s, key, map[string]any{"events": []any{
		map[string]any{"event": "bi_a", "idempotency_key": "k1"},                                       // repeat
		map[string]any{"event": "bi_b", "idempotency_key": "k2", "properties": map[string]any{"n": 2}}, // conflict
		map[string]any{"event": "bi_c"},                                                                // no key: new
		map[string]any{"event": "bi_d", "idempotency_key": "k3"},                                       // new
		map[string]any{"event": "bi_d", "idempotency_key": "k3"},                                       // repeat within the batch
		map[string]any{"event": "bi_e", "idempotency_key": "k3"},                                       // conflict within the batch
	}})
	if b2.Accepted != 4 || b2.Rejected != 2 {
		t.Fatalf("batch 2 %+v", b2)
	}
	r := b2.Results
	if r[0].Status != "accepted" || r[0].ID != b1.Results[0].ID {
		t.Fatalf("repeat got %+v, want id %s", r[0], b1.Results[0].ID)
	}
	if r[1].Status != "rejected" || r[1].Error != "idempotency_conflict" || r[1].ID != "" {
		t.Fatalf("conflict got %+v", r[1])
	}
	if r[2].Status != "accepted" || r[2].ID == b1.Results[2].ID {
		t.Fatalf("keyless entry got %+v", r[2])
	}
	if r[3].Status != "accepted" || r[4].Status != "accepted" || r[3].ID != r[4].ID {
		t.Fatalf("in-batch repeat got %+v and %+v", r[3], r[4])
	}
	if r[5].Status != "rejected" || r[5].Error != "idempotency_conflict" {
		t.Fatalf("in-batch conflict got %+v", r[5])
	}
	for name, want := range map[string]int{"bi_a": 1, "bi_b": 1, "bi_c": 2, "bi_d": 1, "bi_e": 0} {
		if got := count(name); got != want {
			t.Fatalf("%s: %d stored, want %d", name, got, want)
		}
	}
	if e := pubGetEvent(t, s, key, b1.Results[1].ID); string(e.Properties) != `{"n":1}` {
		t.Fatalf("conflict changed the stored event: %s", e.Properties)
	}
	// Concurrent batches with the same keys store each key once.
	var wg sync.WaitGroup
	bodies := make([]*Response, 10)
	errs := make([]error, 10)
	for i := range bodies {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			bodies[i], errs[i] = pubDoRaw("POST", s.Public+"/events/batch", key,
				[]byte(`{"events":[{"event":"bi_race","idempotency_key":"r1"},{"event":"bi_race","idempotency_key":"r2"}]}`),
				"Content-Type: application/json")
		}(i)
	}
	wg.Wait()
	ids := map[string]bool{}
	for i, resp := range bodies {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		wantStatus(t, resp, 201)
		b := pubDecodeBatch(t, resp)
		if b.Accepted != 2 {
			t.Fatalf("concurrent batch %+v", b)
		}
		ids[b.Results[0].ID+"/"+b.Results[1].ID] = true
	}
	if len(ids) != 1 || count("bi_race") != 2 {
		t.Fatalf("concurrent batches: id pairs %v, %d stored", ids, count("bi_race"))
	}
}

func TestGetEvent(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "get", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	testKey := s.Key(t, p, "secret", "test")
	c := pubCreate(t, s, key, map[string]any{"event": "got", "visitor_id": "vv", "properties": map[string]any{"a": []any{1, "b"}}})
	e := pubGetEvent(t, s, key, c.ID)
	if e.VisitorID == nil || *e.VisitorID != "vv" || string(e.Properties) != `{"a":[1,"b"]}` {
		t.Fatalf("got %+v %s", e, e.Properties)
	}
	c2 := pubCreate(t, s, key, map[string]any{"event": "got"})
	if e := pubGetEvent(t, s, key, c2.ID); e.VisitorID != nil {
		t.Fatalf("visitor_id present: %+v", e)
	}

	// Crockford base32 decoding is not case-sensitive in spirit, but the id
	// as issued must always work; other spellings must not leak other events.
	missing := []string{
		"evt_" + strings.Repeat("0", 26),
		"evt_7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
		c.ID[:len(c.ID)-1] + pubFlip(c.ID[len(c.ID)-1]),
		c.ID[4:],
		"evt_123",
		c.ID + "0",
		"evt_" + strings.Repeat("U", 26),
		"evt_" + strings.Repeat("!", 26),
		"nope",
		"%00",
		url.PathEscape("evt_" + strings.Repeat("Z", 25) + "é"),
	}
	for _, id := range missing {
		r := Do(t, "GET", s.Public+"/events/"+id, key, nil)
		pubWantExactError(t, r, 404, "not_found", pubMsgNotFound)
	}
	// Another environment of the same project.
	pubWantExactError(t, Do(t, "GET", s.Public+"/events/"+c.ID, testKey, nil), 404, "not_found", pubMsgNotFound)
	ct := pubCreate(t, s, testKey, map[string]any{"event": "got"})
	pubGetEvent(t, s, testKey, ct.ID)
	pubWantExactError(t, Do(t, "GET", s.Public+"/events/"+ct.ID, key, nil), 404, "not_found", pubMsgNotFound)
	// Another project.
	q := s.Project(t, "get-other", "", pubBigLimits)
	qKey := s.Key(t, q, "secret", "live")
	pubWantExactError(t, Do(t, "GET", s.Public+"/events/"+c.ID, qKey, nil), 404, "not_found", pubMsgNotFound)
	// Durable across a hard kill.
	s.Kill()
	s.Restart()
	if got := pubGetEvent(t, s, key, c.ID); got.ID != c.ID || got.Timestamp != e.Timestamp || got.CreatedAt != e.CreatedAt {
		t.Fatalf("after kill %+v, before %+v", got, e)
	}
}

func TestListEvents(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "list", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	t0 := time.Date(2025, 7, 1, 9, 0, 0, 0, time.UTC)
	mk := func(name, visitor string, ts time.Time) string {
		body := map[string]any{"event": name, "timestamp": pubISO(ts)}
		if visitor != "" {
			body["visitor_id"] = visitor
		}
		return pubCreate(t, s, key, body).ID
	}
	e1 := mk("signup", "v1", t0)
	e2 := mk("purchase", "v1", t0.Add(time.Minute))
	e3 := mk("signup", "v2", t0.Add(2*time.Minute))
	e4 := mk("signup", "v1", t0.Add(2*time.Minute)) // ties with e3; newer id first
	e5 := mk("pageview", "", t0.Add(3*time.Minute))
	e6 := mk("signup", "v1", t0.Add(-24*time.Hour)) // recorded last, oldest timestamp

	q := url.QueryEscape
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{e5, e4, e3, e2, e1, e6}},
		{"event=signup", []string{e4, e3, e1, e6}},
		{"visitor_id=v1", []string{e4, e2, e1, e6}},
		{"event=signup&visitor_id=v1", []string{e4, e1, e6}},
		{"event=purchase&visitor_id=v2", nil},
		{"event=nothing", nil},
		{"visitor_id=nobody", nil},
		{"from=" + q(pubISO(t0.Add(time.Minute))), []string{e5, e4, e3, e2}},
		{"from=" + q(pubISO(t0.Add(time.Minute+time.Millisecond))), []string{e5, e4, e3}},
		{"to=" + q(pubISO(t0.Add(2*time.Minute))), []string{e4, e3, e2, e1, e6}},
		{"to=" + q(pubISO(t0.Add(2*time.Minute-time.Millisecond))), []string{e2, e1, e6}},
		{"from=" + q(pubISO(t0.Add(2*time.Minute))) + "&to=" + q(pubISO(t0.Add(2*time.Minute))), []string{e4, e3}},
		{"from=" + q("2025-07-01T11:01:00+02:00") + "&to=" + q("2025-07-01T09:02:00Z"), []string{e4, e3, e2}},
		{"from=" + q("2025-07-01T09:01:00") + "&to=" + q("2025-07-01T09:01:00.000Z"), []string{e2}},
		{"from=2025-07-01", []string{e5, e4, e3, e2, e1}},
		{"to=2025-07-01", []string{e5, e4, e3, e2, e1, e6}},
		{"to=2025-06-30", []string{e6}},
		{"from=2025-06-30&to=2025-06-30", []string{e6}},
		{"from=2025-07-02", nil},
		{"event=signup&from=2025-07-01&to=2025-07-01", []string{e4, e3, e1}},
		{"visitor_id=v1&from=" + q(pubISO(t0)) + "&to=" + q(pubISO(t0.Add(time.Minute))), []string{e2, e1}},
		{"limit=2", []string{e5, e4}},
		{"limit=2&offset=2", []string{e3, e2}},
		{"limit=2&offset=4", []string{e1, e6}},
		{"limit=2&offset=6", nil},
		{"offset=100", nil},
		{"event=signup&limit=1&offset=3", []string{e6}},
		{"visitor_id=v1&limit=1&offset=1", []string{e2}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			l := pubList(t, s, key, tc.query)
			if got := pubListIDs(l); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("ids %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("items", func(t *testing.T) {
		l := pubList(t, s, key, "limit=100")
		byID := map[string]pubListItem{}
		for _, it := range l.Data {
			byID[it.ID] = it
		}
		if it := byID[e5]; it.Event != "pageview" || it.VisitorID != nil || it.Timestamp != pubISO(t0.Add(3*time.Minute)) {
			t.Fatalf("item %+v", it)
		}
		if it := byID[e1]; it.Event != "signup" || it.VisitorID == nil || *it.VisitorID != "v1" || it.Timestamp != pubISO(t0) {
			t.Fatalf("item %+v", it)
		}
	})

	t.Run("pagination", func(t *testing.T) {
		var ids []string
		base := time.Date(2025, 8, 1, 0, 0, 0, 0, time.UTC)
		for i := 0; i < 25; i++ {
			ids = append(ids, mk("paged", "", base.Add(time.Duration(i)*time.Second)))
		}
		slices.Reverse(ids)
		for _, tc := range []struct {
			query            string
			limit, offset, n int
			hasMore          bool
		}{
			{"", 20, 0, 20, true},
			{"limit=10", 10, 0, 10, true},
			{"limit=10&offset=10", 10, 10, 10, true},
			{"limit=10&offset=15", 10, 15, 10, false},
			{"limit=10&offset=20", 10, 20, 5, false},
			{"offset=5", 20, 5, 20, false},
			{"offset=4", 20, 4, 20, true},
			{"limit=100", 100, 0, 25, false},
			{"limit=1", 1, 0, 1, true},
			{"limit=1&offset=24", 1, 24, 1, false},
			{"limit=25&offset=0", 25, 0, 25, false},
			{"limit=24", 24, 0, 24, true},
			{"offset=25", 20, 25, 0, false},
			{"offset=1000", 20, 1000, 0, false},
			{"limit=007&offset=0003", 7, 3, 7, true},
		} {
			l := pubList(t, s, key, "event=paged&"+tc.query)
			pg := l.Pagination
			if pg.Total != 25 || pg.Limit != tc.limit || pg.Offset != tc.offset || len(l.Data) != tc.n || pg.HasMore != tc.hasMore {
				t.Fatalf("%q: pagination %+v with %d items, want limit %d offset %d n %d has_more %v",
					tc.query, pg, len(l.Data), tc.limit, tc.offset, tc.n, tc.hasMore)
			}
			if tc.n > 0 && !slices.Equal(pubListIDs(l), ids[tc.offset:tc.offset+tc.n]) {
				t.Fatalf("%q: ids %v, want %v", tc.query, pubListIDs(l), ids[tc.offset:tc.offset+tc.n])
			}
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		for _, tc := range []struct{ query, field string }{
			{"limit=0", "limit"},
			{"limit=101", "limit"},
			{"limit=-1", "limit"},
			{"limit=abc", "limit"},
			{"limit=1.5", "limit"},
			{"limit=", "limit"},
			{"limit=1e2", "limit"},
			{"limit=99999999999999999999", "limit"},
			{"offset=-1", "offset"},
			{"offset=abc", "offset"},
			{"offset=1.0", "offset"},
			{"offset=", "offset"},
			{"from=yesterday", "from"},
			{"from=2025-13-01", "from"},
			{"from=", "from"},
			{"to=2025-02-30", "to"},
			{"to=20250101", "to"},
			{"from=2025-07-02&to=2025-07-01", "from"},
			{"from=" + q("2025-07-01T00:00:00.001Z") + "&to=" + q("2025-07-01T00:00:00Z"), "from"},
			{"event=bad-name", "event"},
			{"event=", "event"},
			{"visitor_id=", "visitor_id"},
		} {
			t.Run(tc.query, func(t *testing.T) {
				r := Do(t, "GET", s.Public+"/events?"+tc.query, key, nil)
				pubWantDetail(t, r, 400, "bad_request", tc.field, "")
				if r.Header.Get("X-RateLimit-Limit") == "" {
					t.Fatalf("400 without X-RateLimit-Limit")
				}
			})
		}
		r := Do(t, "GET", s.Public+"/events?limit=0&offset=-1&from=x&to=y", key, nil)
		e := pubWantErr(t, r, 400, "bad_request", "")
		for _, f := range []string{"limit", "offset", "from", "to"} {
			if e.Details[f] == "" {
				t.Fatalf("details lack %s: %s", f, r.Body)
			}
		}
	})
}

// TestListBackfillTotals stores events with explicit timestamps spread over
// minutes, hours and days (many on bucket edges) and checks the list total
// for many ranges against a count done here.
func TestListBackfillTotals(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "backfill", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	rng := rand.New(rand.NewSource(42))
	base := time.Date(2025, 3, 9, 0, 0, 0, 0, time.UTC).UnixMilli()
	const day, hour, minute = 86_400_000, 3_600_000, 60_000
	span := int64(5 * day)

	type ev struct {
		id, name, visitor string
		ts                int64
	}
	var tss []int64
	for d := int64(0); d <= 5; d++ { // day, hour and minute edges and their neighbours
		for _, o := range []int64{0, -1, 1, hour, hour - 1, 13*hour + 17*minute, 13*hour + 17*minute - 1, day - 1} {
			if v := d*day + o; v >= 0 && v < span {
				tss = append(tss, v)
			}
		}
	}
	for len(tss) < 700 {
		switch rng.Intn(4) {
		case 0: // clustered in one busy hour
			tss = append(tss, 2*day+10*hour+rng.Int63n(hour))
		case 1: // on a whole minute
			tss = append(tss, rng.Int63n(span/minute)*minute)
		default:
			tss = append(tss, rng.Int63n(span))
		}
	}
	tss = append(tss, tss[10], tss[10], tss[200]) // same-ms ties
	rng.Shuffle(len(tss), func(i, j int) { tss[i], tss[j] = tss[j], tss[i] })

	names := []string{"alpha", "beta", "gamma"}
	var evs []ev
	for start := 0; start < len(tss); start += 100 {
		end := min(start+100, len(tss))
		var entries []any
		var batch []ev
		for _, off := range tss[start:end] {
			e := ev{name: names[rng.Intn(len(names))], visitor: fmt.Sprintf("u%d", rng.Intn(4)), ts: base + off}
			entries = append(entries, map[string]any{"event": e.name, "visitor_id": e.visitor, "timestamp": pubMsText(e.ts)})
			batch = append(batch, e)
		}
		b := pubPostBatch(t, s, key, map[string]any{"events": entries})
		if b.Accepted != len(entries) {
			t.Fatalf("batch %+v", b)
		}
		for i := range batch {
			batch[i].id = b.Results[i].ID
		}
		evs = append(evs, batch...)
	}

	expect := func(name, visitor string, from, to int64) []ev {
		var out []ev
		for _, e := range evs {
			if e.ts >= from && e.ts <= to && (name == "" || e.name == name) && (visitor == "" || e.visitor == visitor) {
				out = append(out, e)
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].ts != out[j].ts {
				return out[i].ts > out[j].ts
			}
			return out[i].id > out[j].id
		})
		return out
	}
	type rng2 struct{ from, to int64 }
	ranges := []rng2{{base, base + span}, {base - day, base + 10*day}}
	for d := int64(0); d < 5; d++ {
		ranges = append(ranges,
			rng2{base + d*day, base + (d+1)*day - 1},
			rng2{base + d*day + 1, base + (d+1)*day - 2},
			rng2{base + d*day - 1, base + (d+1)*day},
			rng2{base + d*day + hour, base + d*day + 2*hour - 1},
			rng2{base + d*day + 13*hour + 17*minute, base + d*day + 13*hour + 17*minute},
			rng2{base + d*day + 13*hour + 17*minute - 1, base + d*day + 13*hour + 18*minute},
			rng2{base + d*day + 23*hour + 59*minute, base + (d+2)*day + 30*minute + 1},
		)
	}
	for i := 0; i < 120; i++ {
		a, b := base-hour+rng.Int63n(span+2*hour), base-hour+rng.Int63n(span+2*hour)
		if i%3 == 0 { // short ranges inside one hour or minute
			b = a + rng.Int63n(2*minute)
		}
		if a > b {
			a, b = b, a
		}
		ranges = append(ranges, rng2{a, b})
	}
	for i, r := range ranges {
		name, visitor := "", ""
		switch i % 4 {
		case 1:
			name = names[i%3]
		case 2:
			visitor = fmt.Sprintf("u%d", i%4)
		case 3:
			name, visitor = names[(i+1)%3], fmt.Sprintf("u%d", (i+2)%4)
		}
		query := "limit=3&from=" + url.QueryEscape(pubMsText(r.from)) + "&to=" + url.QueryEscape(pubMsText(r.to))
		if name != "" {
			query += "&event=" + name
		}
		if visitor != "" {
			query += "&visitor_id=" + visitor
		}
		want := expect(name, visitor, r.from, r.to)
		l := pubList(t, s, key, query)
		if l.Pagination.Total != len(want) {
			t.Fatalf("%s: total %d, want %d", query, l.Pagination.Total, len(want))
		}
		for j, it := range l.Data {
			if it.ID != want[j].id {
				t.Fatalf("%s: item %d is %s (%s), want %s (%s)", query, j, it.ID, it.Timestamp, want[j].id, pubMsText(want[j].ts))
			}
		}
		if len(l.Data) != min(3, len(want)) {
			t.Fatalf("%s: %d items, want %d", query, len(l.Data), min(3, len(want)))
		}
	}
	// Date-only bounds over each day.
	for d := int64(-1); d <= 5; d++ {
		date := time.UnixMilli(base + d*day).UTC().Format("2006-01-02")
		want := expect("", "", base+d*day, base+(d+1)*day-1)
		if l := pubList(t, s, key, "from="+date+"&to="+date); l.Pagination.Total != len(want) {
			t.Fatalf("day %s: total %d, want %d", date, l.Pagination.Total, len(want))
		}
		want = expect("beta", "", base+d*day, base+span+day)
		if l := pubList(t, s, key, "event=beta&from="+date); l.Pagination.Total != len(want) {
			t.Fatalf("beta from %s: total %d, want %d", date, l.Pagination.Total, len(want))
		}
	}
	// Walking a whole range page by page yields the exact order.
	want := expect("", "", base+day+5*hour, base+3*day+7*hour)
	var got []string
	for off := 0; ; off += 100 {
		l := pubList(t, s, key, fmt.Sprintf("limit=100&offset=%d&from=%s&to=%s", off,
			url.QueryEscape(pubMsText(base+day+5*hour)), url.QueryEscape(pubMsText(base+3*day+7*hour))))
		got = append(got, pubListIDs(l)...)
		if !l.Pagination.HasMore {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("walked %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i].id {
			t.Fatalf("walk item %d is %s, want %s", i, got[i], want[i].id)
		}
	}
	// Totals survive a restart (counters are persisted with the events).
	s.Restart()
	for _, r := range ranges[:20] {
		want := expect("", "", r.from, r.to)
		l := pubList(t, s, key, "limit=1&from="+url.QueryEscape(pubMsText(r.from))+"&to="+url.QueryEscape(pubMsText(r.to)))
		if l.Pagination.Total != len(want) {
			t.Fatalf("after restart [%s, %s]: total %d, want %d", pubMsText(r.from), pubMsText(r.to), l.Pagination.Total, len(want))
		}
	}
}
