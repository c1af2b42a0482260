package test

import (
	"strings"
	"testing"
)

// Issue 13 item 8: numbers must be finite float64 values; 1e999 is a 400
// like NaN on every way in, and nothing is stored.
func TestHardeningNonFiniteNumbers(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "finite", "", nil)
	key := s.Key(t, p, "secret", "test")
	for _, num := range []string{"1e999", "-1e999", "1.7976931348623159e308", strings.Repeat("9", 309)} {
		r := Do(t, "POST", s.Public+"/events", key, `{"event":"big","properties":{"x":`+num+`}}`)
		m := wantError(t, r, 400, "bad_request", "")
		if d, _ := m["details"].(map[string]any); !strings.Contains(d["body"].(string), "not a finite float64 value") {
			t.Errorf("%s: details %v", num, m["details"])
		}
		r = Do(t, "POST", s.Public+"/events/batch", key, `{"events":[{"event":"fine"},{"event":"big","properties":{"x":[`+num+`]}}]}`)
		wantError(t, r, 400, "bad_request", "")
	}
	// The largest finite value is fine and comes back as sent.
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, `{"event":"max","properties":{"x":1.7976931348623157e308}}`), 201)

	res := s.importBody(t, p, "test", strings.NewReader(`{"event":"imp_ok"}`+"\n"+`{"event":"imp_big","properties":{"x":1e999}}`+"\n"), false)
	if res.Lines != 2 || res.Accepted != 1 || res.Rejected != 1 || len(res.Errors) != 1 || res.Errors[0].Line != 2 || res.Errors[0].Error != "bad_request" {
		t.Fatalf("import result %+v", res)
	}
	r := Do(t, "GET", s.Public+"/events", key, nil)
	wantStatus(t, r, 200)
	names := []string{}
	for _, e := range jarr(t, r.JSON(t)["data"]) {
		names = append(names, e.(map[string]any)["event"].(string))
	}
	if strings.Join(names, ",") != "imp_ok,max" && strings.Join(names, ",") != "max,imp_ok" {
		t.Fatalf("stored events %v, want only max and imp_ok", names)
	}
}
