package storage

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// traitsText renders traits as k=v@ts, sorted, for comparisons.
func traitsText(ts []Trait) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s=%s@%d", t.Key, t.Value, t.Timestamp))
	}
	return strings.Join(parts, " ")
}

func operand(ts int64, traits string) []byte {
	u := &ProfileUpdate{ID: "x", Timestamp: ts}
	if traits != "" {
		u.Traits = []byte(traits)
	}
	return appendProfileOperand(nil, u)
}

// mergeAll merges operands given oldest first the way Pebble may: starting
// from any operand and folding the others in as newer or older.
func mergeAll(t *testing.T, ops [][]byte, start int) ProfileRecord {
	t.Helper()
	vm, err := merger.Merge(profileKey(nil, 1, "x"), ops[start])
	if err != nil {
		t.Fatal(err)
	}
	// Forward from start, then backward (Pebble's iterators do either).
	for i := start + 1; i < len(ops); i++ {
		if err := vm.MergeNewer(ops[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := start - 1; i >= 0; i-- {
		if err := vm.MergeOlder(ops[i]); err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := vm.Finish(true)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeProfileRecord("x", v)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestProfileMerger(t *testing.T) {
	cases := []struct {
		name        string
		ops         [][]byte // oldest operand first
		traits      string
		first, last int64
	}{
		{"one operand", [][]byte{operand(5, `{"a":1,"b":"x"}`)}, "a=1@5 b=\"x\"@5", 5, 5},
		{"later timestamp wins", [][]byte{operand(5, `{"a":1}`), operand(9, `{"a":2}`)}, "a=2@9", 5, 9},
		{"older message written later loses", [][]byte{operand(9, `{"a":2}`), operand(5, `{"a":1,"b":true}`)}, "a=2@9 b=true@5", 5, 9},
		{"tie: newer operand wins", [][]byte{operand(7, `{"a":"old"}`), operand(7, `{"a":"new"}`)}, `a="new"@7`, 7, 7},
		{"no traits keeps seen times", [][]byte{operand(3, `{"a":null}`), operand(1, ""), operand(8, "")}, "a=null@3", 1, 8},
		{"nested values kept raw", [][]byte{operand(2, `{"o":{"k":[1,2]}}`), operand(4, `{"p":"é"}`)}, `o={"k":[1,2]}@2 p="é"@4`, 2, 4},
		{"three-way", [][]byte{operand(10, `{"a":1,"b":1}`), operand(20, `{"b":2,"c":2}`), operand(15, `{"a":3,"c":3}`)}, "a=3@15 b=2@20 c=2@20", 10, 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for start := range c.ops {
				rec := mergeAll(t, c.ops, start)
				if got := traitsText(rec.Traits); got != c.traits {
					t.Errorf("start %d: traits %s, want %s", start, got, c.traits)
				}
				if rec.FirstSeen != c.first || rec.LastSeen != c.last {
					t.Errorf("start %d: seen %d..%d, want %d..%d", start, rec.FirstSeen, rec.LastSeen, c.first, c.last)
				}
			}
		})
	}
}

func TestProfileMergerPartialMergeIsOperand(t *testing.T) {
	// A compaction may merge operands 2 and 3 without the base; the result
	// merged later with operand 1 must equal the full merge.
	ops := [][]byte{operand(10, `{"a":1}`), operand(10, `{"a":2}`), operand(5, `{"a":3,"b":1}`)}
	vm, _ := merger.Merge(profileKey(nil, 1, "x"), ops[1])
	_ = vm.MergeNewer(ops[2])
	partial, _, err := vm.Finish(false)
	if err != nil {
		t.Fatal(err)
	}
	rec := mergeAll(t, [][]byte{ops[0], partial}, 0)
	if got := traitsText(rec.Traits); got != "a=2@10 b=1@5" {
		t.Errorf("traits %s", got)
	}
}

func TestProfileMergerBoundsTraits(t *testing.T) {
	var a, b strings.Builder
	a.WriteString("{")
	b.WriteString("{")
	for i := range MaxProfileTraits {
		if i > 0 {
			a.WriteString(",")
			b.WriteString(",")
		}
		fmt.Fprintf(&a, `"k%04d":1`, 2*i+1)
		fmt.Fprintf(&b, `"k%04d":2`, 2*i)
	}
	a.WriteString("}")
	b.WriteString("}")
	for start := range 2 {
		rec := mergeAll(t, [][]byte{operand(1, a.String()), operand(2, b.String())}, start)
		if len(rec.Traits) != MaxProfileTraits || rec.Traits[0].Key != "k0000" || rec.Traits[MaxProfileTraits-1].Key != fmt.Sprintf("k%04d", MaxProfileTraits-1) {
			t.Fatalf("start %d: %d traits, %s..%s", start, len(rec.Traits), rec.Traits[0].Key, rec.Traits[len(rec.Traits)-1].Key)
		}
	}
}

func commitProfiles(t *testing.T, db *DB, ds uint32, us ...*ProfileUpdate) {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	for _, u := range us {
		b.AddProfile(ds, u)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

func mustProfile(t *testing.T, db *DB, ds uint32, id string) Profile {
	t.Helper()
	p, err := db.Profile(ds, id)
	if err != nil {
		t.Fatalf("Profile(%s): %v", id, err)
	}
	return p
}

func TestProfileMergeThroughPebble(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 4
	compact := func() {
		t.Helper()
		if err := db.Pebble().Compact(t.Context(), []byte{prefixProfile}, []byte{prefixProfile + 1}, true); err != nil {
			t.Fatal(err)
		}
	}
	commitProfiles(t, db.DB, ds, &ProfileUpdate{ID: "u1", Traits: []byte(`{"plan":"free","name":"Ann"}`), Timestamp: 1000})
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	// Same batch, two operands: the later one wins the tie on "plan".
	commitProfiles(t, db.DB, ds,
		&ProfileUpdate{ID: "u1", Traits: []byte(`{"plan":"pro"}`), Timestamp: 2000},
		&ProfileUpdate{ID: "u1", Traits: []byte(`{"plan":"team"}`), Timestamp: 2000},
		&ProfileUpdate{ID: "u1", Traits: []byte(`{"name":"Old"}`), Timestamp: 500})
	check := func(want string, first, last int64) {
		t.Helper()
		p := mustProfile(t, db.DB, ds, "u1")
		if got := traitsText(p.Traits); got != want || p.FirstSeen != first || p.LastSeen != last || !p.HasSeen {
			t.Errorf("profile %s %d..%d, want %s %d..%d", got, p.FirstSeen, p.LastSeen, want, first, last)
		}
	}
	check(`name="Ann"@1000 plan="team"@2000`, 500, 2000)
	compact()
	check(`name="Ann"@1000 plan="team"@2000`, 500, 2000)
	db2 := db.reopen(t)
	check2 := func() {
		p := mustProfile(t, db2.DB, ds, "u1")
		if got := traitsText(p.Traits); got != `name="Ann"@1000 plan="team"@2000` {
			t.Errorf("after reopen: %s", got)
		}
	}
	check2()

	// A deletion (tombstone) under later operands: the profile starts over.
	if err := db2.eraseProfile(ds, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db2.Profile(ds, "u1"); err != ErrNotFound {
		t.Fatalf("after erase: %v, want ErrNotFound", err)
	}
	commitProfiles(t, db2.DB, ds, &ProfileUpdate{ID: "u1", Traits: []byte(`{"plan":"again"}`), Timestamp: 100})
	if err := db2.Pebble().Compact(t.Context(), []byte{prefixProfile}, []byte{prefixProfile + 1}, true); err != nil {
		t.Fatal(err)
	}
	p := mustProfile(t, db2.DB, ds, "u1")
	if got := traitsText(p.Traits); got != `plan="again"@100` || p.FirstSeen != 100 || p.LastSeen != 100 {
		t.Errorf("after erase and rewrite: %s %d..%d", got, p.FirstSeen, p.LastSeen)
	}
}

func TestProfileLinks(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 2
	// A cycle a-b-c-a, plus d linked to c, plus an unrelated e; another
	// dataset holds a link of a that must not show.
	commitProfiles(t, db.DB, ds,
		&ProfileUpdate{ID: "a", Traits: []byte(`{"x":1,"t":"a"}`), Links: []string{"b"}, Timestamp: 10},
		&ProfileUpdate{ID: "b", Traits: []byte(`{"x":2}`), Links: []string{"c", "b", ""}, Timestamp: 20},
		&ProfileUpdate{ID: "c", Links: []string{"a"}, Timestamp: 5},
		&ProfileUpdate{ID: "d", Traits: []byte(`{"t":"d"}`), Links: []string{"c"}, Timestamp: 10},
		&ProfileUpdate{ID: "e", Traits: []byte(`{"x":9}`), Timestamp: 99})
	commitProfiles(t, db.DB, ds+1, &ProfileUpdate{ID: "a", Links: []string{"zz"}, Timestamp: 1})

	for _, id := range []string{"a", "b", "c", "d"} {
		p := mustProfile(t, db.DB, ds, id)
		var want []string
		for _, x := range []string{"a", "b", "c", "d"} {
			if x != id {
				want = append(want, x)
			}
		}
		if !slices.Equal(p.LinkedIDs, want) {
			t.Errorf("%s: linked %v, want %v", id, p.LinkedIDs, want)
		}
		// x: b's 2 wins by time. t: a and d tie at 10: the id asked for
		// wins, else the smallest id.
		wantT := `"a"`
		if id == "d" {
			wantT = `"d"`
		}
		if got := traitsText(p.Traits); got != "t="+wantT+"@10 x=2@20" {
			t.Errorf("%s: traits %s", id, got)
		}
		if p.FirstSeen != 5 || p.LastSeen != 20 || p.Truncated {
			t.Errorf("%s: seen %d..%d truncated %v", id, p.FirstSeen, p.LastSeen, p.Truncated)
		}
	}
	p := mustProfile(t, db.DB, ds, "e")
	if len(p.LinkedIDs) != 0 || p.LinkedIDs == nil {
		t.Errorf("e: linked %#v", p.LinkedIDs)
	}
	// An id with links but no profile key of its own is found.
	commitProfiles(t, db.DB, ds, &ProfileUpdate{ID: "f", Links: []string{"anon-1"}, Timestamp: 7})
	if p := mustProfile(t, db.DB, ds, "anon-1"); !slices.Equal(p.LinkedIDs, []string{"f"}) || len(p.Traits) != 0 || p.FirstSeen != 7 {
		t.Errorf("anon-1: %+v", p)
	}
	if _, err := db.Profile(ds, "nobody"); err != ErrNotFound {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := db.Profile(ds+1, "b"); err != ErrNotFound {
		t.Errorf("other dataset: %v", err)
	}
}

func TestProfileLinkBound(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 1
	// A chain of 150 ids, each linked to the next, plus a star around it.
	var us []*ProfileUpdate
	for i := range 150 {
		us = append(us, &ProfileUpdate{ID: fmt.Sprintf("c%03d", i), Links: []string{fmt.Sprintf("c%03d", i+1)}, Timestamp: int64(i)})
	}
	commitProfiles(t, db.DB, ds, us...)
	p := mustProfile(t, db.DB, ds, "c000")
	if len(p.LinkedIDs) != MaxProfileIDs-1 || !p.Truncated {
		t.Fatalf("linked %d truncated %v", len(p.LinkedIDs), p.Truncated)
	}
	// Breadth first from c000: the nearest 99 are c001..c099.
	if p.LinkedIDs[0] != "c001" || p.LinkedIDs[98] != "c099" {
		t.Errorf("linked %s..%s", p.LinkedIDs[0], p.LinkedIDs[98])
	}
	if p.FirstSeen != 0 || p.LastSeen != 99 {
		t.Errorf("seen %d..%d", p.FirstSeen, p.LastSeen)
	}
	// Exactly 100 ids: not truncated.
	p = mustProfile(t, db.DB, ds, "c150") // c050..c150 is 101 ids from the end: truncated
	if !p.Truncated || len(p.LinkedIDs) != 99 {
		t.Errorf("from the end: %d truncated %v", len(p.LinkedIDs), p.Truncated)
	}
	db2 := openTestDB(t, "")
	us = us[:0]
	for i := range 99 {
		us = append(us, &ProfileUpdate{ID: "hub", Links: []string{fmt.Sprintf("s%02d", i)}, Timestamp: 1})
	}
	commitProfiles(t, db2.DB, ds, us...)
	if p := mustProfile(t, db2.DB, ds, "s05"); p.Truncated || len(p.LinkedIDs) != 99 {
		t.Errorf("star of 100: %d truncated %v", len(p.LinkedIDs), p.Truncated)
	}
}

func TestProfileSeenFromEvents(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 3
	ev := func(n uint64, visitor string, ts int64) *Event {
		return &Event{ID: testID(n), Name: "page", VisitorID: visitor, HasVisitor: true, Timestamp: ts, CreatedAt: ts}
	}
	// Profile times alone.
	commitProfiles(t, db.DB, ds, &ProfileUpdate{ID: "u", Traits: []byte(`{"a":1}`), Links: []string{"anon"}, Timestamp: 5000})
	p := mustProfile(t, db.DB, ds, "u")
	if p.FirstSeen != 5000 || p.LastSeen != 5000 {
		t.Fatalf("without events: %d..%d", p.FirstSeen, p.LastSeen)
	}
	// The anonymous id's events before the identify and the user's after it.
	commitEvents(t, db.DB, ds, ev(1, "anon", 1000), ev(2, "anon", 2000), ev(3, "u", 9000), ev(4, "u", 7000), ev(5, "other", 1))
	for _, id := range []string{"u", "anon"} {
		p = mustProfile(t, db.DB, ds, id)
		if p.FirstSeen != 1000 || p.LastSeen != 9000 {
			t.Errorf("%s with events: %d..%d", id, p.FirstSeen, p.LastSeen)
		}
	}
	// Events alone do not make a profile.
	if _, err := db.Profile(ds, "other"); err != ErrNotFound {
		t.Errorf("events only: %v", err)
	}
}

func TestEraseVisitorErasesProfileAndLinks(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 6
	commitProfiles(t, db.DB, ds,
		&ProfileUpdate{ID: "user", Traits: []byte(`{"email":"a@b.c"}`), Links: []string{"anon1", "anon2"}, Timestamp: 10},
		&ProfileUpdate{ID: "anon1", Traits: []byte(`{"seen":true}`), Timestamp: 5},
		&ProfileUpdate{ID: "other", Traits: []byte(`{"keep":1}`), Links: []string{"anon2"}, Timestamp: 10})
	commitEvents(t, db.DB, ds, &Event{ID: testID(1), Name: "identify", VisitorID: "user", HasVisitor: true, Timestamp: 10, CreatedAt: 10})
	if _, err := db.EraseVisitor(ds, "user", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Profile(ds, "user"); err != ErrNotFound {
		t.Errorf("user after erasure: %v", err)
	}
	p := mustProfile(t, db.DB, ds, "anon1")
	if len(p.LinkedIDs) != 0 || traitsText(p.Traits) != "seen=true@5" {
		t.Errorf("anon1: %+v", p)
	}
	p = mustProfile(t, db.DB, ds, "anon2")
	if !slices.Equal(p.LinkedIDs, []string{"other"}) {
		t.Errorf("anon2 linked %v", p.LinkedIDs)
	}
	for _, pre := range []string{"user"} {
		lo := linkPrefix(nil, ds, pre)
		if n := countKeys(t, db.DB, lo, prefixEnd(lo)); n != 0 {
			t.Errorf("%d link keys of %s left", n, pre)
		}
	}
	for _, a := range []string{"anon1", "anon2", "other"} {
		if n := countKeys(t, db.DB, linkKey(nil, ds, a, "user"), append(linkKey(nil, ds, a, "user"), 0)); n != 0 {
			t.Errorf("link %s -> user left", a)
		}
	}
	// Deleting the dataset removes profiles and links.
	if err := db.DeleteDatasets(ds); err != nil {
		t.Fatal(err)
	}
	for _, pre := range []byte{prefixProfile, prefixLink} {
		lo := appendDataset(nil, pre, ds)
		if n := countKeys(t, db.DB, lo, appendDataset(nil, pre, ds+1)); n != 0 {
			t.Errorf("%c: %d keys left after DeleteDatasets", pre, n)
		}
	}
}

func TestListProfiles(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 7
	ids := []string{"b", "a", "aa", "c", "ab"}
	for i, id := range ids {
		commitProfiles(t, db.DB, ds, &ProfileUpdate{ID: id, Traits: []byte(fmt.Sprintf(`{"n":%d}`, i)), Timestamp: int64(i)})
	}
	commitProfiles(t, db.DB, ds+1, &ProfileUpdate{ID: "zz", Timestamp: 1})
	var got []string
	after := ""
	pages := 0
	for {
		recs, more, err := db.ListProfiles(ds, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range recs {
			got = append(got, r.ID)
		}
		if !more {
			break
		}
		after = recs[len(recs)-1].ID
	}
	if want := []string{"a", "aa", "ab", "b", "c"}; !slices.Equal(got, want) || pages != 3 {
		t.Errorf("ids %v in %d pages, want %v in 3", got, pages, want)
	}
	recs, more, err := db.ListProfiles(ds, "ab", 10)
	if err != nil || more || len(recs) != 2 || recs[0].ID != "b" || traitsText(recs[0].Traits) != "n=0@0" {
		t.Errorf("after ab: %+v %v %v", recs, more, err)
	}
	if recs, more, _ := db.ListProfiles(ds+2, "", 10); len(recs) != 0 || more || recs == nil {
		t.Errorf("empty dataset: %v %v", recs, more)
	}
}

// TestProfileAfterCrash: a profile update and its links committed with
// the event (Commit(true)) survive a crash that drops every unsynced write,
// as after kill -9; one added to a batch that was never committed does not.
func TestProfileAfterCrash(t *testing.T) {
	const ds = 5
	fs := vfs.NewCrashableMem()
	db := openMem(t, fs)
	b := db.NewBatch()
	b.AddEvent(ds, &Event{ID: testID(1), Name: "identify", VisitorID: "u", HasVisitor: true, Timestamp: 50, CreatedAt: 50})
	b.AddProfile(ds, &ProfileUpdate{ID: "u", Traits: []byte(`{"plan":"pro"}`), Links: []string{"anon"}, Timestamp: 50})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = db.NewBatch()
	b.AddProfile(ds, &ProfileUpdate{ID: "u", Traits: []byte(`{"plan":"lost"}`), Timestamp: 60})
	b.Close() // never committed
	db2 := openMem(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	defer db2.Close()
	defer db.Close()
	p, err := db2.Profile(ds, "anon")
	if err != nil {
		t.Fatal(err)
	}
	if traitsText(p.Traits) != `plan="pro"@50` || !slices.Equal(p.LinkedIDs, []string{"u"}) || p.FirstSeen != 50 {
		t.Errorf("after crash: %+v", p)
	}
}

func TestResolver(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 8
	r, err := db.NewResolver(ds)
	if err != nil {
		t.Fatal(err)
	}
	if r.HasLinks() {
		t.Error("an empty dataset has links")
	}
	if p, _ := r.Person("x"); p != "x" {
		t.Errorf("no links: %s", p)
	}
	_ = r.Close()
	commitProfiles(t, db.DB, ds,
		&ProfileUpdate{ID: "u9", Links: []string{"b"}, Timestamp: 1},
		&ProfileUpdate{ID: "b", Links: []string{"c", "a"}, Timestamp: 1},
		&ProfileUpdate{ID: "z", Links: []string{"y"}, Timestamp: 1})
	commitProfiles(t, db.DB, ds+1, &ProfileUpdate{ID: "0", Links: []string{"c"}, Timestamp: 1})
	r, err = db.NewResolver(ds)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id, want := range map[string]string{"u9": "a", "c": "a", "a": "a", "b": "a", "y": "y", "z": "y", "lonely": "lonely"} {
		for range 2 { // second time from the memo
			if p, err := r.Person(id); err != nil || p != want {
				t.Errorf("Person(%s) = %s, %v; want %s", id, p, err, want)
			}
		}
	}
	ids, err := db.PersonIDs(ds, "c")
	if err != nil || PersonOf(ids) != "a" || len(ids) != 4 || ids[0] != "c" {
		t.Errorf("PersonIDs(c) = %v, %v", ids, err)
	}
}
