package storage

import (
	"errors"
	"slices"
	"testing"
)

// TestRepeatedLinkWritesNothing: once a link is committed, a message that
// only repeats it adds nothing to a batch; traits are still written; after
// an erasure the link is written again.
func TestRepeatedLinkWritesNothing(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 7
	link := &ProfileUpdate{ID: "user", Links: []string{"anon"}, Timestamp: 1000}
	add := func(u *ProfileUpdate) (writes uint32) {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		b.AddProfile(ds, u)
		writes = b.b.Count()
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		return writes
	}
	if n := add(link); n != 3 { // profile operand and two link keys
		t.Fatalf("first link: %d writes, want 3", n)
	}
	if n := add(link); n != 0 {
		t.Fatalf("repeated link: %d writes, want 0", n)
	}
	if n := add(&ProfileUpdate{ID: "user", Links: []string{"anon", "anon2"}, Timestamp: 2000}); n != 5 {
		t.Fatalf("a new link beside a known one: %d writes, want 5", n)
	}
	if n := add(&ProfileUpdate{ID: "user", Links: []string{"anon"}, Traits: []byte(`{"plan":"pro"}`), Timestamp: 3000}); n == 0 {
		t.Fatal("traits with a known link were not written")
	}
	if _, err := db.EraseVisitor(ds, "anon", nil); err != nil {
		t.Fatal(err)
	}
	if n := add(link); n != 3 {
		t.Fatalf("link after the erasure: %d writes, want 3", n)
	}
	p, err := db.Profile(ds, "anon")
	if err != nil || !slices.Contains(p.LinkedIDs, "user") {
		t.Fatalf("profile of anon after relinking: %+v %v", p, err)
	}
	if _, err := db.Profile(ds, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown profile: %v", err)
	}
}

// TestLinkCacheGeneration: links committed by a batch that began before an
// erasure are not remembered after it.
func TestLinkCacheGeneration(t *testing.T) {
	var c linkCache
	u := &ProfileUpdate{ID: "a", Links: []string{"b"}}
	_, gen := c.known(1, u, nil)
	c.clear() // an erasure commits meanwhile
	c.add(gen, []string{string(linkKey(nil, 1, "a", "b"))})
	if ok, _ := c.known(1, u, nil); ok {
		t.Fatal("a link from before the erasure is remembered")
	}
	_, gen = c.known(1, u, nil)
	c.add(gen, []string{string(linkKey(nil, 1, "a", "b"))})
	if ok, _ := c.known(1, u, nil); !ok {
		t.Fatal("a committed link is not remembered")
	}
	if ok, _ := c.known(2, u, nil); ok {
		t.Fatal("a link is remembered in another dataset")
	}
}
