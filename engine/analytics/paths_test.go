package analytics

import (
	"reflect"
	"testing"
)

func nodes(labels ...string) []PathNode {
	out := make([]PathNode, len(labels))
	for i, l := range labels {
		name := l
		if l[0] == '/' {
			name = "pageview"
		}
		out[i] = PathNode{Name: name, Label: l}
	}
	return out
}

func TestPathTransitions(t *testing.T) {
	seqs := [][]PathNode{
		nodes("/", "/pricing", "signup", "/docs"),
		nodes("login", "/", "/pricing", "/docs"),
		nodes("/", "/docs", "signup"),
		nodes("login"), // never reached the start
	}
	got := PathTransitions(seqs, "pageview", "", 2, 10)
	want := []Transition{
		{Step: 1, From: "/", To: "/pricing", Count: 2},
		{Step: 1, From: "/", To: "/docs", Count: 1},
		{Step: 2, From: "/pricing", To: "/docs", Count: 1},
		{Step: 2, From: "/pricing", To: "signup", Count: 1},
		{Step: 2, From: "/docs", To: "signup", Count: 1},
	}
	// Ties within a step are ordered by from, then to.
	want[2], want[3], want[4] = want[4], want[2], want[3]
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("forwards:\n%+v\nwant\n%+v", got, want)
	}
	back := PathTransitions(seqs, "", "signup", 2, 10)
	wantBack := []Transition{
		{Step: 1, From: "/docs", To: "signup", Count: 1},
		{Step: 1, From: "/pricing", To: "signup", Count: 1},
		{Step: 2, From: "/", To: "/docs", Count: 1},
		{Step: 2, From: "/", To: "/pricing", Count: 1},
	}
	if !reflect.DeepEqual(back, wantBack) {
		t.Fatalf("backwards:\n%+v\nwant\n%+v", back, wantBack)
	}
	if top := PathTransitions(seqs, "pageview", "", 2, 1); len(top) != 2 || top[0].Count != 2 {
		t.Fatalf("limit 1 per step: %+v", top)
	}
}
