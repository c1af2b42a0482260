package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestIsBot(t *testing.T) {
	for props, want := range map[string]bool{
		`{"$bot":true}`:                     true,
		`{"a":1, "$bot" : true, "b":"x"}`:   true,
		`{"$bot":false}`:                    false,
		`{"$bot":"true"}`:                   false,
		`{"nested":{"$bot":true}}`:          false,
		`{"note":"\"$bot\":true"}`:          false,
		`{}`:                                false,
		``:                                  false,
		`{"$device":"bot","$browser":"Go"}`: false,
	} {
		if got := IsBot([]byte(props)); got != want {
			t.Errorf("IsBot(%s) = %v, want %v", props, got, want)
		}
	}
}

// botFixture stores, in one day of ds 5: humans h1 and h2 (pageviews with
// amount 1 and 2, a signup), a bot (two pageviews with amount 10, and a
// "crawl" event only bots send), two of them in a partial minute at the
// range's end. It returns the bounds of a range with unaligned ends.
func botFixture(t *testing.T, db *DB) (from, to int64) {
	t.Helper()
	day := int64(planDay)
	bot := `{"$bot":true,"$device":"bot","amount":10,"plan":"x"}`
	for i, e := range []struct {
		name, visitor string
		ts            int64
		props         string
	}{
		{"pageview", "h1", day + 10*minuteMs, `{"amount":1,"plan":"x"}`},
		{"pageview", "h2", day + 2*hourMs, `{"amount":2,"plan":"y"}`},
		{"signup", "h1", day + 3*hourMs, `{}`},
		{"pageview", "crawler", day + 2*hourMs + 5, bot},
		{"crawl", "crawler", day + 5*hourMs, bot},
		{"pageview", "crawler", day + 6*hourMs + 30_000, bot}, // partial last minute
		{"pageview", "h2", day + 6*hourMs + 40_000, `{"amount":4}`},
	} {
		commitTestEvent(t, db, 5, uint64(i+1), e.name, e.visitor, e.ts, e.props)
	}
	return day + 5*minuteMs + 123, day + 6*hourMs + 50_000
}

// aggOne aggregates the whole range as one bucket.
func aggOne(t *testing.T, db *DB, q AggQuery, from, to int64) Agg {
	t.Helper()
	q.Dataset, q.Bounds = 5, []int64{from, to + 1}
	aggs, err := db.Aggregate(q)
	if err != nil {
		t.Fatal(err)
	}
	return aggs[0]
}

// TestBotsKeptApart checks every reader of derived data and indexes: the
// default leaves bots out and counts them, Bots includes them, lists count
// them, and aligned buckets, partial minutes, visitor filters, where=
// scans, property breakdowns, funnel occurrences and visitor histories
// agree. It runs before and after the checkpoint moved the overlay into
// Pebble, and after a reopen.
func TestBotsKeptApart(t *testing.T) {
	db := rOpen(t, "")
	from, to := botFixture(t, db.DB)
	check := func(t *testing.T, db *DB) {
		if n, err := db.Count(5, "", from, to); err != nil || n != 7 {
			t.Errorf("Count(all) = %d, %v; lists show every event, want 7", n, err)
		}
		if n, err := db.Count(5, "pageview", from, to); err != nil || n != 5 {
			t.Errorf("Count(pageview) = %d, %v; want 5", n, err)
		}
		for _, c := range []struct {
			q                   AggQuery
			count, bots, visits int64
			sum                 float64
		}{
			{AggQuery{Property: "amount", Unique: true}, 4, 3, 2, 7},
			{AggQuery{Property: "amount", Unique: true, Bots: true}, 7, 0, 3, 37},
			{AggQuery{Name: "pageview", Property: "amount", Unique: true}, 3, 2, 2, 7},
			{AggQuery{Name: "pageview", Property: "amount", Unique: true, Bots: true}, 5, 0, 3, 27},
			{AggQuery{Name: "crawl"}, 0, 1, 0, 0},
			{AggQuery{VisitorID: "crawler", HasVisitor: true, Property: "amount"}, 0, 3, 0, 0},
			{AggQuery{VisitorID: "crawler", HasVisitor: true, Property: "amount", Bots: true}, 3, 0, 0, 30},
			{AggQuery{Match: func(p []byte) bool { return string(lookupOr(p, "plan")) == `"x"` }}, 1, 3, 0, 0},
			{AggQuery{Match: func(p []byte) bool { return string(lookupOr(p, "plan")) == `"x"` }, Bots: true}, 4, 0, 0, 0},
		} {
			a := aggOne(t, db, c.q, from, to)
			visits := int64(0)
			if a.Sketch != nil {
				visits = a.Sketch.Count()
			}
			if a.Count != c.count || a.Bots != c.bots || a.Sum != c.sum || (c.q.Unique && visits != c.visits) {
				t.Errorf("%+v: count %d bots %d sum %v visitors %d; want %d %d %v %d",
					c.q, a.Count, a.Bots, a.Sum, visits, c.count, c.bots, c.sum, c.visits)
			}
		}
		groups, total, err := db.GroupByProperty(GroupQuery{Dataset: 5, From: from, To: to, GroupBy: "plan"})
		if err != nil || total.Count != 4 || total.Bots != 3 || groups["x"].Count != 1 {
			t.Errorf("GroupByProperty: total %+v x %+v, %v", total, groups["x"], err)
		}
		groups, total, err = db.GroupByProperty(GroupQuery{Dataset: 5, From: from, To: to, GroupBy: "plan", Bots: true})
		if err != nil || total.Count != 7 || total.Bots != 0 || groups["x"].Count != 4 {
			t.Errorf("GroupByProperty(bots): total %+v x %+v, %v", total, groups["x"], err)
		}
		var bots []string
		if _, err := db.StepOccurrences(5, "pageview", "", false, from, to, 0, func(o Occurrence) {
			if o.Bot {
				bots = append(bots, o.Visitor)
			}
		}); err != nil || !slices.Equal(bots, []string{"crawler", "crawler"}) {
			t.Errorf("StepOccurrences bots = %v, %v", bots, err)
		}
		evs, err := db.VisitorEvents(5, "crawler", from, to, 0)
		if err != nil || len(evs) != 3 || !evs[0].Bot || evs[1].Name != "crawl" {
			t.Errorf("VisitorEvents(crawler) = %+v, %v", evs, err)
		}
		if names, err := db.EventNames(5); err != nil || !slices.Equal(names, []string{"crawl", "pageview", "signup"}) {
			t.Errorf("EventNames = %v, %v", names, err)
		}
		page, total2, err := db.List(ListQuery{Dataset: 5, VisitorID: "crawler", HasVisitor: true, Name: "crawl", From: from, To: to, Limit: 10})
		if err != nil || total2 != 1 || len(page) != 1 {
			t.Errorf("List(crawler, crawl) = %d events, total %d, %v", len(page), total2, err)
		}
	}
	t.Run("overlay", func(t *testing.T) { check(t, db.DB) })
	db.derived.checkpoint()
	t.Run("checkpointed", func(t *testing.T) { check(t, db.DB) })
	db = db.reopen(t)
	t.Run("reopened", func(t *testing.T) { check(t, db.DB) })
}

func lookupOr(p []byte, name string) []byte {
	v, _ := lookupMember(p, name)
	return v
}

// TestBotsExactAfterCrash: bot series are logged in the commit's L entry
// like any derived data, so a crash before the checkpoint (kill -9) keeps
// both the excluded count and the included totals exact.
func TestBotsExactAfterCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := openMem(t, fs)
	day := int64(planDay)
	var evs []*Event
	for i := range 30 {
		props := `{"amount":1}`
		if i%3 == 0 {
			props = `{"$bot":true,"amount":5}`
		}
		evs = append(evs, &Event{ID: testID(uint64(i + 1)), Name: "pageview", VisitorID: fmt.Sprint("v", i%7),
			HasVisitor: true, Timestamp: day + int64(i)*minuteMs, Properties: []byte(props)})
	}
	commitEvents(t, db, 5, evs...)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand.New(rand.NewPCG(1, 2))})
	_ = db.Close()
	db2 := openMem(t, crashed)
	defer db2.Close()
	a := aggOne(t, db2, AggQuery{Property: "amount"}, day, day+dayMs-1)
	b := aggOne(t, db2, AggQuery{Property: "amount", Bots: true}, day, day+dayMs-1)
	if a.Count != 20 || a.Bots != 10 || a.Sum != 20 || b.Count != 30 || b.Sum != 70 {
		t.Errorf("after crash: default %+v, include %+v; want 20 (10 bots, sum 20), 30 (sum 70)", a, b)
	}
}

// TestEraseBot: erasing a bot visitor takes its events out of the bot
// series (counts and the rebuilt rollups) and leaves humans alone.
func TestEraseBot(t *testing.T) {
	db := rOpen(t, "")
	from, to := botFixture(t, db.DB)
	db.derived.checkpoint()
	if n, err := db.EraseVisitor(5, "crawler", nil); err != nil || n != 3 {
		t.Fatalf("EraseVisitor = %d, %v", n, err)
	}
	a := aggOne(t, db.DB, AggQuery{Property: "amount", Unique: true, Bots: true}, from, to)
	h := aggOne(t, db.DB, AggQuery{Property: "amount", Unique: true}, from, to)
	if a.Count != 4 || a.Sum != 7 || a.Sketch.Count() != 2 || h.Count != 4 || h.Bots != 0 || h.Sum != 7 {
		t.Errorf("after erasure: include %+v (visitors %d), exclude %+v", a, a.Sketch.Count(), h)
	}
	if n, err := db.Count(5, "", from, to); err != nil || n != 4 {
		t.Errorf("Count = %d, %v; want 4", n, err)
	}
}

// BenchmarkIsBot is what AddEvent pays per event to tell bots apart: the
// bench's single scenario (a secret key's purchase, not enriched), a
// human's enriched pageview (no "$bot" member) and a bot's.
func BenchmarkIsBot(b *testing.B) {
	human := []byte(`{"url":"https://shop.example/pricing?utm_source=newsletter","path":"/pricing","referrer":"https://www.google.com/",` +
		`"$browser":"Chrome","$os":"Windows","$device":"desktop","$referrer_source":"search","$referrer_host":"google.com","$country":"DE"}`)
	bot := []byte(`{"url":"https://shop.example/","path":"/","$browser":"Googlebot","$os":"Other","$device":"bot","$bot":true,"$referrer_source":"direct"}`)
	for _, c := range []struct {
		name  string
		props []byte
	}{{"purchase", []byte(`{"amount":49.99,"currency":"EUR","plan":"pro","items":3}`)}, {"human", human}, {"bot", bot}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				IsBot(c.props)
			}
		})
	}
}

// TestBotWithoutVisitor: a bot event without a visitor id (a server that
// flags its own bot traffic) is marked in the name index too, so a range
// with partial minutes and a where= filter on its name leave it out as the
// whole-minute buckets do.
func TestBotWithoutVisitor(t *testing.T) {
	db := rOpen(t, "")
	day := int64(planDay)
	commitEvents(t, db.DB, 5,
		&Event{ID: testID(1), Name: "crawl", Timestamp: day + 10*minuteMs + 5, Properties: []byte(`{"$bot":true}`)},
		&Event{ID: testID(2), Name: "crawl", Timestamp: day + 10*minuteMs + 7, Properties: []byte(`{"$bot":true}`)})
	all := func([]byte) bool { return true }
	for _, c := range []struct {
		name     string
		q        AggQuery
		from, to int64
	}{
		{"whole minutes", AggQuery{Name: "crawl"}, day, day + hourMs - 1},
		{"partial minute", AggQuery{Name: "crawl"}, day + 10*minuteMs + 1, day + hourMs - 1},
		{"where=", AggQuery{Name: "crawl", Match: all}, day, day + hourMs - 1},
	} {
		if a := aggOne(t, db.DB, c.q, c.from, c.to); a.Count != 0 || a.Bots != 2 {
			t.Errorf("%s: count %d, bots %d; want 0 and 2", c.name, a.Count, a.Bots)
		}
	}
}
