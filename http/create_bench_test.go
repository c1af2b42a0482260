package http

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/enrich"
	"github.com/eventd/eventd/engine/ratelimit"
)

// benchEvent is the bench's default single event (bench.EventTemplate), so
// allocs/op here matches what the eventd-bench profiles count per request.
const benchEvent = `{"event":"purchase","visitor_id":"v_1","properties":{"amount":12.5,"currency":"EUR","sku":"sku_1","quantity":2,"page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_1","campaign":"spring_sale"}}`

// BenchmarkCreateEvent is POST /events end to end in one process: the
// header hook, the handler, the key actor, a shard and Pebble on an
// in-memory filesystem (no fsync), through an in-memory listener. allocs/op
// is the whole server's (and the client's, which allocates nothing per
// request) objects per single-event write; run it with -cpu 2 and a
// parallelism high enough that group commits form, as under load:
//
//	go test -run '^$' -bench CreateEvent -benchmem -cpu 2 ./http/
func BenchmarkCreateEvent(b *testing.B) {
	for _, kind := range []string{engine.Secret, engine.Public} {
		b.Run(kind, func(b *testing.B) { benchCreate(b, kind, benchEvent, "", nil) })
	}
}

// benchPageview is a t.js pageview's properties on a custom event name: a
// public key's pageviews pass the per-IP pageview guard, which a benchmark
// from one address would hit, and every public-key event is enriched alike.
const benchPageview = `{"event":"view","visitor_id":"v_1","properties":{"url":"https://shop.example/p?utm_source=newsletter&utm_medium=email","path":"/p","referrer":"https://www.google.com/","title":"P","screen_width":1440,"screen_height":900}}`

// BenchmarkCreateEnriched is BenchmarkCreateEvent with the enrichment on
// (as serve runs it): the bench's single scenario (secret key, purchase:
// not enriched) and a public key's event with a browser User-Agent, url and
// referrer (enriched, the user agent cached after the first request), and
// the same without an Enricher for comparison.
func BenchmarkCreateEnriched(b *testing.B) {
	en, err := enrich.New(enrich.Options{})
	if err != nil {
		b.Fatal(err)
	}
	const chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	b.Run("secret-purchase", func(b *testing.B) { benchCreate(b, engine.Secret, benchEvent, "", en) })
	b.Run("public-view-off", func(b *testing.B) { benchCreate(b, engine.Public, benchPageview, chrome, nil) })
	b.Run("public-view-on", func(b *testing.B) { benchCreate(b, engine.Public, benchPageview, chrome, en) })
}

func benchCreate(b *testing.B, kind, body, ua string, en *enrich.Enricher) {
	c, key, eng := benchServer(b, kind, en)
	auth := "Bearer " + key
	// 64 connections with -cpu 2, as the bench's single scenario.
	benchParallel(b, 32, func(pb *testing.PB, req *fasthttp.Request, resp *fasthttp.Response) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("http://eventd/events")
		req.Header.SetContentType("application/json")
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
		if ua != "" {
			req.Header.SetUserAgent(ua)
		}
		req.SetBodyString(body)
		for pb.Next() && benchDo(b, c, req, resp, fasthttp.StatusCreated) {
		}
	})
	b.ReportMetric(float64(eng.Metrics().Counter("eventd_commits_total", "", "").Value())/float64(b.N), "commits/op")
}

// BenchmarkSetRateHeaders is the rate-limit and request-id headers every
// answered write carries (470 ns before their names were given canonical,
// session 29).
func BenchmarkSetRateHeaders(b *testing.B) {
	ws := []ratelimit.WindowStatus{
		{Name: "minute", Seconds: 60, Limit: 2000, Remaining: 1999, Reset: 1796538353},
		{Name: "hour", Seconds: 3600, Limit: 100000, Remaining: 99999, Reset: 1796538353},
		{Name: "day", Seconds: 86400, Limit: 1000000, Remaining: 999999, Reset: 1796538353},
	}
	var ctx fasthttp.RequestCtx
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Header.Reset()
		ctx.Response.Header.SetCanonical(headerRequestID, []byte("req_40f061d5_3"))
		setRateHeaders(&ctx, ws, now)
	}
}
