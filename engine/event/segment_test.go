package event

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/segment")

// recv is the receipt time of the tests: 2026-01-15T10:30:00Z.
const recv = 1768473000000

func segOne(t *testing.T, body string, typ SegmentType) SegmentMessage {
	t.Helper()
	m, p := DecodeSegmentMessage([]byte(body), typ, recv)
	if p != nil {
		t.Fatalf("DecodeSegmentMessage(%.300s) refused the body: %+v", body, *p)
	}
	if m.Problem != nil {
		t.Fatalf("DecodeSegmentMessage(%.300s) rejected: %v", body, m.Problem.Details)
	}
	checkSegAccepted(t, &m)
	return m
}

func segReject(t *testing.T, body string, typ SegmentType, want map[string]string) {
	t.Helper()
	m, p := DecodeSegmentMessage([]byte(body), typ, recv)
	if p != nil {
		t.Fatalf("DecodeSegmentMessage(%.300s) refused the body: %+v, want a rejected message", body, *p)
	}
	if m.Problem == nil {
		t.Fatalf("DecodeSegmentMessage(%.300s) accepted: %s", body, m.Input.Properties)
	}
	if !reflect.DeepEqual(m, SegmentMessage{Problem: m.Problem}) {
		t.Fatalf("rejected message has fields set: %+v", m)
	}
	checkProblem(t, m.Problem, 400, "bad_request", want)
}

func segBatch(t *testing.T, body string) []SegmentMessage {
	t.Helper()
	msgs, p := DecodeSegmentBatch([]byte(body), recv)
	if p != nil {
		t.Fatalf("DecodeSegmentBatch(%.300s) refused: %+v", body, *p)
	}
	for i := range msgs {
		if msgs[i].Problem == nil {
			checkSegAccepted(t, &msgs[i])
		}
	}
	return msgs
}

// checkSegAccepted asserts the invariants of an accepted message.
func checkSegAccepted(t *testing.T, m *SegmentMessage) {
	t.Helper()
	in := &m.Input
	if !json.Valid(in.Properties) || in.Properties[0] != '{' {
		t.Fatalf("invalid properties %q", in.Properties)
	}
	if dup, err := dupKeys(in.Properties); dup || err != nil {
		t.Fatalf("properties with duplicate keys (%v): %s", err, in.Properties)
	}
	if len(in.Properties) > MaxPropertiesSize || maxContainerDepth(in.Properties) > MaxDepth {
		t.Fatalf("properties over the native limits: %d bytes, depth %d", len(in.Properties), maxContainerDepth(in.Properties))
	}
	if checkName(in.Name) != "" || !in.HasVisitor || !ValidVisitorID(in.VisitorID) {
		t.Fatalf("bad name or visitor accepted: %q %q", in.Name, in.VisitorID)
	}
	if in.VisitorID != m.UserID && (m.UserID != "" || in.VisitorID != m.AnonymousID) {
		t.Fatalf("visitor %q, userId %q, anonymousId %q", in.VisitorID, m.UserID, m.AnonymousID)
	}
	if n := utf8.RuneCountInString(in.IdempotencyKey); n > MaxIdempotencyKeyLen || !utf8.ValidString(in.IdempotencyKey) {
		t.Fatalf("bad messageId accepted: %q", in.IdempotencyKey)
	}
	if in.HasTimestamp && (in.Timestamp < 0 || in.Timestamp > maxTimeMs) {
		t.Fatalf("timestamp out of range: %d", in.Timestamp)
	}
	if m.Type < SegmentTrack || m.Type > SegmentAlias {
		t.Fatalf("type %d", m.Type)
	}
	if m.Traits != nil {
		if !json.Valid(m.Traits) || m.Traits[0] != '{' || cap(m.Traits) != len(m.Traits) {
			t.Fatalf("bad traits %q (cap %d)", m.Traits, cap(m.Traits))
		}
		if v, ok := lookup(in.Properties, "$traits"); !ok || !bytes.Equal(v, m.Traits) {
			t.Fatalf("traits %s are not $traits of %s", m.Traits, in.Properties)
		}
	}
}

// prop returns a top-level member of the properties as its JSON text ("" when absent).
func prop(m SegmentMessage, key string) string {
	v, _ := lookup(m.Input.Properties, key)
	return string(v)
}

func TestParseSegmentType(t *testing.T) {
	for s, want := range map[string]SegmentType{"track": SegmentTrack, "page": SegmentPage, "screen": SegmentScreen,
		"identify": SegmentIdentify, "group": SegmentGroup, "alias": SegmentAlias, "Track": 0, "": 0, "batch": 0, "track ": 0} {
		if got := ParseSegmentType(s); got != want {
			t.Errorf("ParseSegmentType(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestSegmentEventName(t *testing.T) {
	long := strings.Repeat("a", 200)
	tests := []struct {
		event     string // JSON text of the event field
		name      string // "" = rejected
		eventName string // $event_name JSON text, "" = absent
	}{
		{`"signup"`, "signup", ""},
		{`"Order Completed"`, "Order_Completed", `"Order Completed"`},
		{`"Order Cancelled"`, "Order_Cancelled", `"Order Cancelled"`}, // as long as the one before
		{`"Order  -- Completed!"`, "Order_Completed", `"Order  -- Completed!"`},
		{`"  Café  Ordered!! "`, "Caf_Ordered", `"  Café  Ordered!! "`},
		{`"😀 smile"`, "smile", `"😀 smile"`},
		{`"a__b"`, "a__b", ""},
		{`"a _b"`, "a__b", `"a _b"`},
		{`"a!_!b"`, "a___b", `"a!_!b"`},
		{`"__init__"`, "init", `"__init__"`},
		{`"_x"`, "x", `"_x"`},
		{`"page.viewed"`, "page_viewed", `"page.viewed"`},
		{`"Order\u0020Completed"`, "Order_Completed", `"Order\u0020Completed"`},
		{`"\u0073ignup"`, "signup", ""}, // the same name, only escaped
		{`"` + long + `"`, long[:128], `"` + long + `"`},
		{`"` + strings.Repeat("b", 127) + ` y"`, strings.Repeat("b", 127) + "_", `"` + strings.Repeat("b", 127) + ` y"`},
		{`"` + long[:128] + `"`, long[:128], ""},
		{`"日本語"`, "", ""},
		{`"!!!"`, "", ""},
		{`"___"`, "", ""},
		{`""`, "", ""},
		{`5`, "", ""},
		{`null`, "", ""},
		{`{"a":1}`, "", ""},
	}
	for _, tt := range tests {
		body := `{"event":` + tt.event + `,"userId":"u1"}`
		if tt.name == "" {
			segReject(t, body, SegmentTrack, map[string]string{"event": "is required"})
			continue
		}
		m := segOne(t, body, SegmentTrack)
		if m.Input.Name != tt.name || prop(m, "$event_name") != tt.eventName {
			t.Errorf("event %.40s: name %q, $event_name %s; want %q, %s", tt.event, m.Input.Name, prop(m, "$event_name"), tt.name, tt.eventName)
		}
	}
	segReject(t, `{"userId":"u1"}`, SegmentTrack, map[string]string{"event": "is required"})

	// In a batch a name is normalized once and reused by the messages that
	// follow with the same name as sent: each name twice in a row, then the
	// whole table again, so every message follows another name.
	var msgs []string
	var want []int
	for round := 0; round < 2; round++ {
		for i, tt := range tests {
			for rep := 0; rep <= 1-round; rep++ {
				msgs = append(msgs, `{"type":"track","event":`+tt.event+`,"userId":"u1"}`)
				want = append(want, i)
			}
		}
	}
	for j, m := range segBatch(t, `{"batch":[`+strings.Join(msgs, ",")+`]}`) {
		tt := tests[want[j]]
		if tt.name == "" {
			if m.Problem == nil {
				t.Errorf("batch message %d (event %.40s) accepted", j, tt.event)
			}
			continue
		}
		if m.Problem != nil || m.Input.Name != tt.name || prop(m, "$event_name") != tt.eventName {
			t.Errorf("batch message %d (event %.40s): name %q, $event_name %s, problem %v; want %q, %s",
				j, tt.event, m.Input.Name, prop(m, "$event_name"), m.Problem, tt.name, tt.eventName)
		}
	}
}

func TestSegmentTypeMapping(t *testing.T) {
	tests := []struct {
		typ    SegmentType
		body   string
		name   string
		props  string
		traits string
	}{
		{SegmentTrack, `{"event":"Signed Up","userId":"u1","properties":{"plan":"pro"},"context":{"ip":"1.2.3.4"}}`,
			"Signed_Up", `{"plan":"pro","$context":{"ip":"1.2.3.4"},"$user_id":"u1","$event_name":"Signed Up"}`, ""},
		{SegmentTrack, `{"event":"x","anonymousId":"a1","name":"ignored","category":"ignored","traits":"ignored","groupId":[],"previousId":{}}`,
			"x", `{"$anonymous_id":"a1"}`, ""},
		{SegmentPage, `{"type":"track","anonymousId":"a1","name":"Pricing","category":"Docs","properties":{"url":"https://x"},"event":7}`,
			"pageview", `{"url":"https://x","name":"Pricing","category":"Docs","$anonymous_id":"a1"}`, ""},
		{SegmentPage, `{"userId":"u1"}`, "pageview", `{"$user_id":"u1"}`, ""},
		{SegmentScreen, `{"userId":"u1","anonymousId":"a1","name":"Home","properties":{}}`,
			"screen", `{"name":"Home","$user_id":"u1","$anonymous_id":"a1"}`, ""},
		{SegmentIdentify, `{"userId":"u1","traits":{ "email" : "a@b.c", "plan":"pro" },"properties":{"x":1}}`,
			"identify", `{"x":1,"$traits":{"email":"a@b.c","plan":"pro"},"$user_id":"u1"}`, `{"email":"a@b.c","plan":"pro"}`},
		{SegmentIdentify, `{"anonymousId":"a1"}`, "identify", `{"$anonymous_id":"a1"}`, ""},
		{SegmentGroup, `{"userId":"u1","groupId":"g1","traits":{"name":"Acme"}}`,
			"group", `{"$traits":{"name":"Acme"},"$group_id":"g1","$user_id":"u1"}`, `{"name":"Acme"}`},
		{SegmentGroup, `{"userId":"u1","groupId":123}`, "group", `{"$group_id":"123","$user_id":"u1"}`, ""},
		{SegmentAlias, `{"userId":"u1","previousId":"old-1","traits":{"x":1}}`,
			"alias", `{"$previous_id":"old-1","$user_id":"u1"}`, ""},
	}
	for _, tt := range tests {
		m := segOne(t, tt.body, tt.typ)
		if m.Type != tt.typ || m.Input.Name != tt.name || string(m.Input.Properties) != tt.props || string(m.Traits) != tt.traits {
			t.Errorf("%s:\n got %d %q %s traits %s\nwant %d %q %s traits %s", tt.body, m.Type, m.Input.Name, m.Input.Properties, m.Traits,
				tt.typ, tt.name, tt.props, tt.traits)
		}
		if (tt.traits == "") != (m.Traits == nil) {
			t.Errorf("%s: traits %v, want nil: %v", tt.body, m.Traits, tt.traits == "")
		}
	}
	m := segOne(t, `{"userId":"u1","previousId":"old-1"}`, SegmentAlias)
	if m.PreviousID != "old-1" || m.UserID != "u1" || m.Input.VisitorID != "u1" {
		t.Errorf("alias: %+v", m)
	}
	if m := segOne(t, `{"userId":"u1","previousId":"old-1","event":"x"}`, SegmentTrack); m.PreviousID != "" {
		t.Errorf("previousId outside alias: %q", m.PreviousID)
	}
}

func TestSegmentUnknownFieldsDropped(t *testing.T) {
	deep := nest(40, "1")
	m := segOne(t, `{"event":"e","userId":"u","channel":"server","version":2,"writeKey":"wk","_metadata":{"a":[1,2]},
		"integrations":`+deep+`,"receivedAt":"x","options":null}`, SegmentTrack)
	if string(m.Input.Properties) != `{"$user_id":"u"}` {
		t.Fatalf("properties %s", m.Input.Properties)
	}
}

func TestSegmentReplacesProperties(t *testing.T) {
	tests := []struct {
		typ   SegmentType
		body  string
		props string
	}{
		{SegmentTrack, `{"event":"e","userId":"u","context":{"c":1},"properties":{"$user_id":"forged","k":1,"$context":"x","$event_name":"y"}}`,
			`{"k":1,"$event_name":"y","$context":{"c":1},"$user_id":"u"}`},
		// Only what the mapping writes is replaced: without a userId, a sent $user_id stays.
		{SegmentTrack, `{"event":"e","anonymousId":"a","properties":{"$user_id":"kept","$x":{"$y":1}}}`,
			`{"$user_id":"kept","$x":{"$y":1},"$anonymous_id":"a"}`},
		{SegmentTrack, `{"event":"E E","anonymousId":"a","properties":{"\u0024anonymous_id":1, "\u0024event_name" : 2,"n\u00e9":3}}`,
			`{"n\u00e9":3,"$anonymous_id":"a","$event_name":"E E"}`},
		{SegmentPage, `{"anonymousId":"a","name":"Home","category":"Docs","properties":{"name":"old","category":"old","title":"T"}}`,
			`{"title":"T","name":"Home","category":"Docs","$anonymous_id":"a"}`},
		// name and category are only replaced when the message sets them.
		{SegmentPage, `{"anonymousId":"a","properties":{"name":"kept","category":"kept"}}`,
			`{"name":"kept","category":"kept","$anonymous_id":"a"}`},
		{SegmentIdentify, `{"userId":"u","traits":{"a":1},"properties":{"$traits":[],"price":"$10"}}`,
			`{"price":"$10","$traits":{"a":1},"$user_id":"u"}`},
		// Everything replaced: no stray comma.
		{SegmentTrack, `{"event":"e","userId":"u","properties":{ "$user_id" : 1 }}`, `{"$user_id":"u"}`},
		{SegmentTrack, `{"event":"e","userId":"u","properties":{"a":"\"$user_id\"", "b" : [ 1 , 2 ] }}`,
			`{"a":"\"$user_id\"","b":[1,2],"$user_id":"u"}`},
	}
	for _, tt := range tests {
		m := segOne(t, tt.body, tt.typ)
		if string(m.Input.Properties) != tt.props {
			t.Errorf("%s:\n got %s\nwant %s", tt.body, m.Input.Properties, tt.props)
		}
	}
}

func TestSegmentBatchContext(t *testing.T) {
	const msgs = `[{"type":"track","event":"a","userId":"u"},{"type":"track","event":"b","userId":"u","context":{"own":true}},` +
		`{"type":"track","event":"c","userId":"u","context":null}]`
	for _, body := range []string{
		`{"context":{"env":1},"batch":` + msgs + `}`,
		`{"batch":` + msgs + `,"context":{"env":1}}`,
		`{"batch":` + msgs + `,"sentAt":"2026-01-15T10:30:00Z","context":{"env":1}}`,
	} {
		got := segBatch(t, body)
		want := []string{`{"$context":{"env":1},"$user_id":"u"}`, `{"$context":{"own":true},"$user_id":"u"}`, `{"$context":{"env":1},"$user_id":"u"}`}
		for i, m := range got {
			if string(m.Input.Properties) != want[i] {
				t.Errorf("%s: message %d: %s, want %s", body, i, m.Input.Properties, want[i])
			}
		}
		// The same message sent alone with that context hashes the same.
		alone := segOne(t, `{"event":"a","userId":"u","context":{"env":1}}`, SegmentTrack)
		if got[0].Input.Hash != alone.Input.Hash {
			t.Errorf("%s: hash differs from the single message's", body)
		}
	}
	for _, body := range []string{`{"batch":` + msgs + `}`, `{"batch":` + msgs + `,"context":null}`} {
		if m := segBatch(t, body); string(m[0].Input.Properties) != `{"$user_id":"u"}` {
			t.Errorf("%s: %s", body, m[0].Input.Properties)
		}
	}
	// A batch context too deep for $context, or not an object, refuses the body.
	for body, want := range map[string]map[string]string{
		`{"batch":[],"context":` + nest(15, "{}") + `}`: {"context": msgTooDeep},
		`{"batch":[],"context":[]}`:                     {"context": msgObject},
		`{"batch":[],"context":{"a":1,"a":2}}`:          {"context": `duplicate key "a"`},
	} {
		_, p := DecodeSegmentBatch([]byte(body), recv)
		if p == nil {
			t.Fatalf("%s accepted", body)
		}
		checkProblem(t, p, 400, "bad_request", want)
	}
	if m := segBatch(t, `{"batch":[{"type":"track","event":"a","userId":"u"}],"context":`+nest(14, "{}")+`}`); m[0].Problem != nil {
		t.Fatalf("15-level batch context: %v", m[0].Problem.Details)
	}
}

func TestSegmentIDs(t *testing.T) {
	tests := []struct {
		body           string
		visitor, uid   string
		anon, userProp string
		anonProp       string
	}{
		{`{"userId":42}`, "42", "42", "", `"42"`, ""},
		{`{"userId":-1.5e3,"anonymousId":"a"}`, "-1.5e3", "-1.5e3", "a", `"-1.5e3"`, `"a"`},
		{`{"anonymousId":7}`, "7", "", "7", "", `"7"`},
		{`{"userId":"","anonymousId":"a"}`, "a", "", "a", "", `"a"`},
		{`{"userId":null,"anonymousId":"a"}`, "a", "", "a", "", `"a"`},
		{`{"userId":"u\u00e9","anonymousId":"a"}`, "ué", "ué", "a", `"u\u00e9"`, `"a"`},
		{`{"userId":"` + strings.Repeat("é", 256) + `"}`, strings.Repeat("é", 256), strings.Repeat("é", 256), "", `"` + strings.Repeat("é", 256) + `"`, ""},
	}
	for _, tt := range tests {
		m := segOne(t, tt.body, SegmentIdentify)
		if m.Input.VisitorID != tt.visitor || m.UserID != tt.uid || m.AnonymousID != tt.anon ||
			prop(m, "$user_id") != tt.userProp || prop(m, "$anonymous_id") != tt.anonProp {
			t.Errorf("%.60s: visitor %q user %q anon %q props %s", tt.body, m.Input.VisitorID, m.UserID, m.AnonymousID, m.Input.Properties)
		}
	}
	for body, want := range map[string]map[string]string{
		`{}`:                                {"userId": msgSegIdentity},
		`{"userId":"","anonymousId":null}`:  {"userId": msgSegIdentity},
		`{"userId":true,"anonymousId":"a"}`: {"userId": msgString},
		`{"anonymousId":["a"]}`:             {"anonymousId": msgString},
		`{"userId":"` + strings.Repeat("x", 257) + `"}`:                          {"userId": MsgVisitorID},
		`{"userId":"u","anonymousId":"` + strings.Repeat("x", 257) + `"}`:        {"anonymousId": MsgVisitorID},
		`{"userId":"u","messageId":""}`:                                          {"messageId": msgIdemKey},
		`{"userId":"u","messageId":"` + strings.Repeat("x", 256) + `"}`:          {"messageId": msgIdemKey},
		`{"userId":"u","messageId":5}`:                                           {"messageId": msgString},
		`{"userId":"u","traits":[]}`:                                             {"traits": msgObject},
		`{"userId":"u","properties":"x"}`:                                        {"properties": msgObject},
		`{"userId":"u","context":1}`:                                             {"context": msgObject},
		`{"userId":"u","userId":"v"}`:                                            {"userId": msgDupField},
		`{"userId":"u","\u0075serId":"v"}`:                                       {"userId": msgDupField},
		`{"userId":"u","channel":"a","channel":"b"}`:                             {"channel": msgDupField},
		`{"userId":"u","type":"track","type":"track"}`:                           {"type": msgDupField},
		`{"userId":"u","properties":{"a":1,"a":2}}`:                              {"properties": `must not contain duplicate key "a"`},
		`{"userId":"u","integrations":{"All":true,"All":false}}`:                 {"integrations": `must not contain duplicate key "All"`},
		`{"userId":"u","timestamp":"yesterday"}`:                                 {"timestamp": msgTimestamp},
		`{"userId":"u","originalTimestamp":"1969-12-31T23:59:59Z"}`:              {"originalTimestamp": msgTimeRange},
		`{"userId":"u","sentAt":12}`:                                             {"sentAt": msgString},
		`{"userId":"u","properties":` + nest(16, "{}") + `}`:                     {"properties": msgTooDeep},
		`{"userId":"u","context":` + nest(15, "{}") + `}`:                        {"context": msgTooDeep},
		`{"userId":"u","traits":` + nest(15, "[]") + `}`:                         {"traits": msgTooDeep},
		`{"userId":"u","properties":{"s":"` + strings.Repeat("x", 32760) + `"}}`: {"properties": msgPropsSize},
	} {
		segReject(t, body, SegmentIdentify, want)
	}
	// The limits hold after mapping: each part fits alone, not together.
	segOne(t, `{"userId":"u","properties":{"s":"`+strings.Repeat("x", 32740)+`"}}`, SegmentIdentify)
	segReject(t, `{"userId":"u","context":{"c":1},"properties":{"s":"`+strings.Repeat("x", 32740)+`"}}`, SegmentIdentify,
		map[string]string{"properties": msgPropsSize})
	// Depth limits at the edge: properties 16 levels, context and traits 15 (they sit inside properties).
	segOne(t, `{"userId":"u","properties":`+nest(15, "{}")+`,"context":`+nest(14, "{}")+`,"traits":`+nest(14, "[]")+`}`, SegmentIdentify)

	for _, tt := range []struct {
		typ  SegmentType
		body string
		want map[string]string
	}{
		{SegmentAlias, `{"anonymousId":"a","previousId":"p"}`, map[string]string{"userId": msgRequired}},
		{SegmentAlias, `{"userId":"u"}`, map[string]string{"previousId": msgRequired}},
		{SegmentAlias, `{"userId":"u","previousId":""}`, map[string]string{"previousId": msgRequired}},
		{SegmentAlias, `{"userId":"u","previousId":"` + strings.Repeat("x", 257) + `"}`, map[string]string{"previousId": MsgVisitorID}},
		{SegmentGroup, `{"userId":"u"}`, map[string]string{"groupId": msgRequired}},
		{SegmentGroup, `{"userId":"u","groupId":true}`, map[string]string{"groupId": msgString, "userId": ""}},
		{SegmentPage, `{"userId":"u","name":1}`, map[string]string{"name": msgString}},
		{SegmentScreen, `{"userId":"u","category":{}}`, map[string]string{"category": msgString}},
	} {
		if tt.want["userId"] == "" {
			delete(tt.want, "userId")
		}
		segReject(t, tt.body, tt.typ, tt.want)
	}
	if m := segOne(t, `{"userId":"u","messageId":"m-1"}`, SegmentIdentify); m.Input.IdempotencyKey != "m-1" {
		t.Errorf("messageId %q", m.Input.IdempotencyKey)
	}
}

func TestSegmentTime(t *testing.T) {
	const (
		t0   = `"2026-01-15T10:00:00Z"` // 1768471200000
		ms0  = int64(1768471200000)
		sent = `"2026-01-15T10:30:10Z"` // client clock 10 s ahead of recv
	)
	tests := []struct {
		name  string
		body  string // a batch body
		ts    int64
		hasTS bool
	}{
		{"timestamp wins, no shift", `{"batch":[{"type":"track","event":"e","userId":"u","timestamp":` + t0 + `,"originalTimestamp":"2020-01-01","sentAt":` + sent + `}],"sentAt":` + sent + `}`, ms0, true},
		{"originalTimestamp, message sentAt", `{"batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":` + t0 + `,"sentAt":` + sent + `}]}`, ms0 - 10000, true},
		{"message sentAt over the envelope's", `{"sentAt":"2026-01-15T10:29:00Z","batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":` + t0 + `,"sentAt":` + sent + `}]}`, ms0 - 10000, true},
		{"envelope sentAt before batch", `{"sentAt":` + sent + `,"batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":` + t0 + `}]}`, ms0 - 10000, true},
		{"envelope sentAt after batch", `{"batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":` + t0 + `}],"sentAt":` + sent + `}`, ms0 - 10000, true},
		{"envelope sentAt after batch, with context", `{"batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":` + t0 + `}],"sentAt":` + sent + `,"context":{"a":1}}`, ms0 - 10000, true},
		{"no sentAt: no shift", `{"batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":` + t0 + `}]}`, ms0, true},
		{"no time: receipt", `{"batch":[{"type":"track","event":"e","userId":"u","sentAt":` + sent + `}],"sentAt":` + sent + `}`, 0, false},
		{"clamped at 1970", `{"batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":"1970-01-01T00:00:01Z","sentAt":"9999-01-01"}]}`, 0, true},
		{"clamped at 9999", `{"batch":[{"type":"track","event":"e","userId":"u","originalTimestamp":"9999-12-31T23:00:00Z","sentAt":"1970-01-01"}]}`, maxTimeMs, true},
	}
	for _, tt := range tests {
		m := segBatch(t, tt.body)[0]
		if m.Problem != nil || m.Input.Timestamp != tt.ts || m.Input.HasTimestamp != tt.hasTS {
			t.Errorf("%s: %d %v %v, want %d %v", tt.name, m.Input.Timestamp, m.Input.HasTimestamp, m.Problem, tt.ts, tt.hasTS)
		}
	}
	m := segOne(t, `{"event":"e","userId":"u","originalTimestamp":`+t0+`,"sentAt":`+sent+`}`, SegmentTrack)
	if m.Input.Timestamp != ms0-10000 {
		t.Errorf("single route skew: %d", m.Input.Timestamp)
	}
	for body, want := range map[string]map[string]string{
		`{"batch":[],"sentAt":"soon"}`: {"sentAt": msgTimestamp},
		`{"batch":[],"sentAt":1}`:      {"sentAt": msgString},
	} {
		_, p := DecodeSegmentBatch([]byte(body), recv)
		if p == nil {
			t.Fatalf("%s accepted", body)
		}
		checkProblem(t, p, 400, "bad_request", want)
	}
}

func TestSegmentHash(t *testing.T) {
	msg := func(extra, sentAt string) string {
		return `{"batch":[{"type":"track","event":"Order Completed","userId":"u","messageId":"m1","originalTimestamp":"2026-01-15T10:00:00Z",` +
			`"properties":{"revenue":5}` + extra + `}],"sentAt":"` + sentAt + `"}`
	}
	a := segBatch(t, msg("", "2026-01-15T10:30:00Z"))[0]
	retry := segBatch(t, msg("", "2026-01-15T10:31:00Z"))[0]
	if a.Input.Hash != retry.Input.Hash || a.Input.Timestamp == retry.Input.Timestamp {
		t.Errorf("a retry with a new sentAt: hash %x vs %x, time %d vs %d", a.Input.Hash, retry.Input.Hash, a.Input.Timestamp, retry.Input.Timestamp)
	}
	spaced := segBatch(t, strings.ReplaceAll(msg(`,"integrations":{"x":true}`, "2026-01-15T10:30:00Z"), ",", " , "))[0]
	if spaced.Input.Hash != a.Input.Hash {
		t.Errorf("whitespace or a dropped field changed the hash")
	}
	for _, other := range []string{
		msg(`,"context":{"ip":"1"}`, "2026-01-15T10:30:00Z"),
		strings.Replace(msg("", "2026-01-15T10:30:00Z"), `"revenue":5`, `"revenue":6`, 1),
		strings.Replace(msg("", "2026-01-15T10:30:00Z"), `10:00:00Z`, `10:00:01Z`, 1),
		strings.Replace(msg("", "2026-01-15T10:30:00Z"), `"userId":"u"`, `"userId":"v"`, 1),
		strings.Replace(msg("", "2026-01-15T10:30:00Z"), `Order Completed`, `Order_Completed`, 1), // same name, no $event_name
	} {
		if b := segBatch(t, other)[0]; b.Input.Hash == a.Input.Hash || b.Input.IdempotencyKey != "m1" {
			t.Errorf("different content, same hash: %s", other)
		}
	}
}

func TestSegmentBatch(t *testing.T) {
	big := `{"type":"track","event":"big","userId":"u","properties":{"s":"` + strings.Repeat("x", 33<<10) + `"}}`
	body := `{"batch":[{"type":"track","event":"a","userId":"u"},` + big + `,{"event":"notype","userId":"u"},{"type":"Track","event":"a","userId":"u"},` +
		`{"type":5,"event":"a","userId":"u"},[],"x",{"type":"identify","userId":"u","traits":{"a":1,"a":1}},{"type":"page","anonymousId":"a"}],` +
		`"writeKey":"wk","integrations":{},"_metadata":{}}`
	msgs := segBatch(t, body)
	if len(msgs) != 9 {
		t.Fatalf("%d messages", len(msgs))
	}
	if msgs[0].Problem != nil || msgs[0].Input.Name != "a" || msgs[8].Problem != nil || msgs[8].Input.Name != "pageview" {
		t.Fatalf("valid messages: %+v %+v", msgs[0], msgs[8])
	}
	if p := msgs[1].Problem; p == nil || p.Code != "payload_too_large" || p.Message != "Message exceeds 32 KB" ||
		!reflect.DeepEqual(p.Details, map[string]string{"message": "must be at most 32768 bytes"}) {
		t.Fatalf("too large: %+v", p)
	}
	for i, want := range map[int]map[string]string{
		2: {"type": msgRequired}, 3: {"type": msgSegType}, 4: {"type": msgSegType},
		5: {"message": msgSegElement}, 6: {"message": msgSegElement}, 7: {"traits": `duplicate key "a"`},
	} {
		if msgs[i].Problem == nil {
			t.Fatalf("message %d accepted", i)
		}
		checkProblem(t, msgs[i].Problem, 400, "bad_request", want)
		if !reflect.DeepEqual(msgs[i], SegmentMessage{Problem: msgs[i].Problem}) {
			t.Fatalf("rejected message %d has fields set", i)
		}
	}
	// Exactly 32768 bytes is allowed.
	pad := `{"type":"track","event":"a","userId":"u","properties":{"s":""}}`
	edge := strings.Replace(pad, `""`, `"`+strings.Repeat("y", MaxSegmentMessage-len(pad))+`"`, 1)
	if len(edge) != MaxSegmentMessage {
		t.Fatal(len(edge))
	}
	if m := segBatch(t, `{"batch":[`+edge+`]}`); m[0].Problem != nil {
		t.Fatalf("32768-byte message: %v", m[0].Problem)
	}
	if m := segBatch(t, `{"batch":[`+edge[:len(edge)-1]+`,"z":1}`+`]}`); m[0].Problem == nil || m[0].Problem.Code != "payload_too_large" {
		t.Fatalf("32774-byte message accepted")
	}
	if m := segBatch(t, ` { "batch" : [ ] } `); m == nil || len(m) != 0 {
		t.Fatalf("empty batch: %v", m)
	}
}

func TestSegmentRefusesBody(t *testing.T) {
	tests := []struct {
		body string
		key  string
		msg  string
	}{
		{``, "body", "empty"},
		{`[]`, "body", msgBodyObject},
		{`"x"`, "body", msgBodyObject},
		{`{"batch":[`, "body", "malformed JSON"},
		{`{"batch":[{"type":"track",}]}`, "body", "malformed JSON"},
		{`{"batch":[{"type":"track"}]} x`, "body", "unexpected data"},
		{"{\"batch\":[{\"type\":\"tr\xffack\"}]}", "body", "invalid UTF-8"},
		{`{"batch":[{"type":"track","properties":{"a":1e999}}]}`, "body", "finite"},
		{`{"batch":[1 2]}`, "body", "expected ','"},
		{`{}`, "batch", msgRequired},
		{`{"events":[]}`, "batch", msgRequired},
		{`{"batch":{}}`, "batch", msgSegBatch},
		{`{"batch":null}`, "batch", msgSegBatch},
		{`{"batch":[],"batch":[]}`, "batch", msgDupField},
		{`{"batch":[],"_metadata":{"a":1,"a":1}}`, "_metadata", `duplicate key "a"`},
	}
	for _, tt := range tests {
		msgs, p := DecodeSegmentBatch([]byte(tt.body), recv)
		if p == nil || msgs != nil {
			t.Errorf("%q accepted: %v", tt.body, msgs)
			continue
		}
		checkProblem(t, p, 400, "bad_request", map[string]string{tt.key: tt.msg})
	}
	for _, body := range []string{``, `[]`, `{"event":"a"`, `{"event":"a"}{}`, `{"event":"a","event":}`, `nul`} {
		m, p := DecodeSegmentMessage([]byte(body), SegmentTrack, recv)
		if p == nil || !reflect.DeepEqual(m, SegmentMessage{}) {
			t.Errorf("%q: %+v %v", body, m, p)
			continue
		}
		checkProblem(t, p, 400, "bad_request", map[string]string{"body": ""})
	}
	m, p := DecodeSegmentMessage([]byte(`{"userId":"u"}`), 0, recv)
	if p != nil || m.Problem == nil {
		t.Errorf("type 0: %+v %v", m, p)
	}
}

func TestSegmentPropertiesDoNotAliasBody(t *testing.T) {
	body := []byte(`{"batch":[{"type":"identify","userId":"u","anonymousId":"a","messageId":"m","traits":{"t":1},"properties":{"p":2},"context":{"c":3}}]}`)
	m := segBatch(t, string(body))[0]
	want := m
	want.Input.Properties = bytes.Clone(m.Input.Properties)
	want.Traits = bytes.Clone(m.Traits)
	want.UserID, want.AnonymousID = strings.Clone(m.UserID), strings.Clone(m.AnonymousID)
	for i := range body {
		body[i] = 'X'
	}
	if !reflect.DeepEqual(m, want) || m.Input.IdempotencyKey != "m" {
		t.Fatalf("the message aliases the body: %+v", m)
	}
	// Appending to Traits cannot write into the properties.
	_ = append(m.Traits, "xxxx"...)
	if string(m.Input.Properties) != string(want.Input.Properties) {
		t.Fatalf("appending to Traits overwrote properties: %s", m.Input.Properties)
	}
}

// TestSegmentGolden maps realistic analytics-node messages (testdata/segment/*.json)
// and compares the mapped properties with the .golden files (go test -update rewrites them).
func TestSegmentGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/segment/*.json")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ Type string }
		if err := json.Unmarshal(body, &head); err != nil {
			t.Fatal(err)
		}
		m := segOne(t, string(body), ParseSegmentType(head.Type))
		var out bytes.Buffer
		out.WriteString("name: " + m.Input.Name + "\nvisitor_id: " + m.Input.VisitorID + "\nidempotency_key: " + m.Input.IdempotencyKey +
			"\ntimestamp: " + string(AppendTime(nil, m.Input.Timestamp)) + "\nproperties:\n")
		if err := json.Indent(&out, m.Input.Properties, "", "  "); err != nil {
			t.Fatal(err)
		}
		out.WriteString("\n")
		golden := strings.TrimSuffix(file, ".json") + ".golden"
		if *updateGolden {
			if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%s:\n%s\nwant\n%s", file, out.Bytes(), want)
		}
		// The batch route maps the same message to the same event.
		b := segBatch(t, `{"batch":[`+string(body)+`],"sentAt":"2026-01-15T10:30:05Z"}`)[0]
		if !reflect.DeepEqual(b, m) {
			t.Errorf("%s: batch and single route differ:\n%+v\n%+v", file, b, m)
		}
	}
}

// FuzzSegmentBatch: never panics, is deterministic, never writes the body,
// and every accepted message holds to the native invariants (valid compact
// JSON properties without duplicate keys, within size and depth).
func FuzzSegmentBatch(f *testing.F) {
	for _, name := range []string{"track", "identify", "page"} {
		body, err := os.ReadFile("testdata/segment/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append(append([]byte(`{"batch":[`), body...), `],"sentAt":"2026-01-15T10:30:05Z"}`...))
	}
	f.Add([]byte(`{"batch":[{"type":"track","event":"É x","anonymousId":7,"originalTimestamp":"2026-01-15","properties":{"\u0024user_id":1,"$x":2}}],"context":{"a":[]},"sentAt":"2026-01-15T10:30:00Z"}`))
	f.Add([]byte(`{"context":{"a":1},"batch":[{"type":"alias","userId":"u","previousId":"p","context":null},5,{"type":"group","userId":"u","groupId":1,"traits":{}}]}`))
	f.Add([]byte(`{"batch":[{"type":"page","userId":"u","name":"n","category":"c","properties":{"name":1,"category":2,"a":{"b":[1,{"c":null}]}}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		msgs, p := DecodeSegmentBatch(body, recv)
		if !bytes.Equal(body, orig) {
			t.Fatalf("body modified")
		}
		msgs2, p2 := DecodeSegmentBatch(orig, recv)
		if !reflect.DeepEqual(msgs, msgs2) || !reflect.DeepEqual(p, p2) {
			t.Fatalf("not deterministic")
		}
		if p != nil {
			if msgs != nil || p.Status != 400 || p.Code != "bad_request" || len(p.Details) == 0 {
				t.Fatalf("bad problem %+v with %d messages", *p, len(msgs))
			}
			return
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			t.Fatalf("accepted invalid JSON")
		}
		var top struct {
			Batch []json.RawMessage `json:"batch"`
		}
		if err := json.Unmarshal(body, &top); err != nil || len(top.Batch) != len(msgs) {
			t.Fatalf("encoding/json sees %d messages (%v), we see %d", len(top.Batch), err, len(msgs))
		}
		for i := range msgs {
			m := &msgs[i]
			if m.Problem != nil {
				if len(m.Problem.Details) == 0 || !reflect.DeepEqual(*m, SegmentMessage{Problem: m.Problem}) {
					t.Fatalf("bad rejected message %+v", *m)
				}
				continue
			}
			if dup, err := dupKeys(top.Batch[i]); dup || err != nil {
				t.Fatalf("accepted a message with duplicate keys (%v)", err)
			}
			checkSegAccepted(t, m)
			// The single route agrees on the same message (it has no envelope).
			var typed struct{ Type string }
			_ = json.Unmarshal(top.Batch[i], &typed)
			// An envelope context can only add to the properties, so what
			// a batch accepts the single route accepts.
			one, p := DecodeSegmentMessage(top.Batch[i], ParseSegmentType(typed.Type), recv)
			if p != nil || one.Problem != nil {
				t.Fatalf("accepted in a batch, not alone: %v %v", p, one.Problem)
			}
			var env map[string]json.RawMessage
			_ = json.Unmarshal(body, &env)
			if _, ok := env["context"]; !ok && !bytes.Equal(one.Input.Properties, m.Input.Properties) {
				t.Fatalf("properties differ alone: %s vs %s", one.Input.Properties, m.Input.Properties)
			}
		}
	})
}

// FuzzSegmentMessage: the single route's guarantees, for every type.
func FuzzSegmentMessage(f *testing.F) {
	body, _ := os.ReadFile("testdata/segment/track.json")
	f.Add(body, uint8(SegmentTrack))
	f.Add([]byte(`{"userId":1,"traits":{"a":{"b":1}},"properties":{"$traits":0}}`), uint8(SegmentIdentify))
	f.Add([]byte(`{"userId":"u","previousId":"p","sentAt":"2026-01-15","originalTimestamp":"2026-01-14"}`), uint8(SegmentAlias))
	f.Fuzz(func(t *testing.T, body []byte, typ uint8) {
		st := SegmentType(typ%6 + 1)
		orig := bytes.Clone(body)
		m, p := DecodeSegmentMessage(body, st, recv)
		if !bytes.Equal(body, orig) {
			t.Fatalf("body modified")
		}
		if p != nil {
			if p.Status != 400 || len(p.Details) == 0 || !reflect.DeepEqual(m, SegmentMessage{}) {
				t.Fatalf("bad problem %+v", *p)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON")
		}
		if m.Problem != nil {
			if m.Problem.Status != 400 || len(m.Problem.Details) == 0 || !reflect.DeepEqual(m, SegmentMessage{Problem: m.Problem}) {
				t.Fatalf("bad rejected message %+v", m)
			}
			return
		}
		if dup, err := dupKeys(body); dup || err != nil {
			t.Fatalf("accepted a message with duplicate keys (%v)", err)
		}
		checkSegAccepted(t, &m)
		if m.Type != st {
			t.Fatalf("type %d, route %d", m.Type, st)
		}
	})
}

// TestSegmentBatchRoom: the message slice is sized from the body's length,
// but a body past MaxSegmentBatch (the HTTP layer refuses those; the
// decoder does not rely on it) reserves no more than a full batch's room.
func TestSegmentBatchRoom(t *testing.T) {
	msg := `{"type":"track","event":"a","userId":"u","properties":{"s":"` + strings.Repeat("x", 30<<10) + `"}}`
	for _, n := range []int{1, 16, 70} {
		body := `{"batch":[` + strings.Repeat(msg+",", n-1) + msg + `]}`
		msgs := segBatch(t, body)
		if len(msgs) != n {
			t.Fatalf("%d messages, want %d", len(msgs), n)
		}
		if bound := max(2*n, MaxSegmentBatch/512); cap(msgs) > bound {
			t.Fatalf("%d messages of %d bytes: room for %d, want at most %d", n, len(body), cap(msgs), bound)
		}
	}
}

// TestDecodeSegmentBatchInto: a slice reused from a larger batch holds the
// next batch's messages only, each its own.
func TestDecodeSegmentBatchInto(t *testing.T) {
	msg := func(ev, user string) string {
		return `{"type":"track","event":"` + ev + `","userId":"` + user + `","timestamp":"2026-01-15T10:30:00.000Z"}`
	}
	first := `{"batch":[` + msg("a", "u1") + `,` + msg("b", "u2") + `,` + msg("c", "u3") + `,42]}`
	buf, p := DecodeSegmentBatchInto(nil, []byte(first), 1768473000300)
	if p != nil || len(buf) != 4 {
		t.Fatalf("first batch: %d messages, %v", len(buf), p)
	}
	got, p := DecodeSegmentBatchInto(buf, []byte(`{"batch":[`+msg("d", "u4")+`]}`), 1768473000300)
	if p != nil || len(got) != 1 {
		t.Fatalf("second batch: %d messages, %v", len(got), p)
	}
	if m := got[0]; m.Problem != nil || m.Input.Name != "d" || m.UserID != "u4" || m.Input.VisitorID != "u4" {
		t.Fatalf("second batch's message = %+v", m)
	}
	if got, p = DecodeSegmentBatchInto(buf, []byte(`{"batch":[]}`), 1768473000300); p != nil || len(got) != 0 || got == nil {
		t.Fatalf("empty batch = %v (nil %v), %v", got, got == nil, p)
	}
}
