package test

import "testing"

func TestSmoke(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "smoke", "", nil)
	key := s.Key(t, p, "secret", "live")
	r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "signup"})
	wantStatus(t, r, 201)
	if err := s.Stop(); err != nil {
		t.Fatalf("SIGTERM exit: %v\n%s", err, s.Logs())
	}
}
