package enrich

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventd/eventd/engine/enrich/enrichtest"
)

const (
	uaChromeWin   = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	uaFirefoxLin  = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"
	uaSafariMac   = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15"
	uaIPhone      = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
	uaIPad        = "Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
	uaAndroid     = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.43 Mobile Safari/537.36"
	uaAndroidTab  = "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	uaEdge        = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0"
	uaChromeOS    = "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	uaGooglebot   = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	uaGooglebotCh = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/120.0.0.0 Safari/537.36"
	uaBingbot     = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"
)

var (
	shared     *Enricher
	sharedOnce sync.Once
)

func testEnricher(t testing.TB) *Enricher {
	sharedOnce.Do(func() {
		var err error
		if shared, err = New(Options{}); err != nil {
			t.Fatal(err)
		}
	})
	return shared
}

func TestAgentFamilies(t *testing.T) {
	e := testEnricher(t)
	for _, c := range []struct {
		ua   string
		want Agent
	}{
		{uaChromeWin, Agent{"Chrome", "Windows", DeviceDesktop, false}},
		{uaFirefoxLin, Agent{"Firefox", "Linux", DeviceDesktop, false}},
		{uaSafariMac, Agent{"Safari", "Mac OS X", DeviceDesktop, false}},
		{uaIPhone, Agent{"Mobile Safari", "iOS", DeviceMobile, false}},
		{uaIPad, Agent{"Mobile Safari", "iOS", DeviceTablet, false}},
		{uaAndroid, Agent{"Chrome Mobile", "Android", DeviceMobile, false}},
		{uaAndroidTab, Agent{"Chrome", "Android", DeviceTablet, false}},
		{uaEdge, Agent{"Edge", "Windows", DeviceDesktop, false}},
		{uaChromeOS, Agent{"Chrome", "Chrome OS", DeviceDesktop, false}},
		{uaGooglebot, Agent{"Googlebot", "Other", DeviceBot, true}},
		{uaGooglebotCh, Agent{"Googlebot", "Other", DeviceBot, true}},
		{uaBingbot, Agent{"bingbot", "Other", DeviceBot, true}},
		{"curl/8.4.0", Agent{"curl", "Other", DeviceBot, true}},
		{"python-requests/2.31.0", Agent{"Python Requests", "Other", DeviceBot, true}},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36", Agent{"HeadlessChrome", "Windows", DeviceBot, true}},
		{"something", Agent{"Other", "Other", DeviceOther, false}},
	} {
		if got, _ := e.Agent(c.ua); got != c.want {
			t.Errorf("%.60q: got %+v, want %+v", c.ua, got, c.want)
		}
		if got := e.ParseAgent(c.ua); got != c.want {
			t.Errorf("%.60q uncached: got %+v, want %+v", c.ua, got, c.want)
		}
	}
}

func TestAgentCacheBounded(t *testing.T) {
	e, err := New(Options{CacheSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	long := uaChromeWin + strings.Repeat(" x", 2000)
	for i := 0; i < 10; i++ {
		e.Agent(long[:len(uaChromeWin)+i*2])
	}
	if n := e.agents.Len(); n != 4 {
		t.Fatalf("cache holds %d, want 4", n)
	}
	e.Agent(long)
	for _, k := range e.agents.Keys() {
		if len(k) > maxUserAgent {
			t.Fatalf("key of %d bytes kept", len(k))
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name, page, ref string
		source, host    string
	}{
		{"no referrer", "https://shop.example/", "", SourceDirect, ""},
		{"internal", "https://shop.example/b", "https://shop.example/a", SourceDirect, ""},
		{"internal www", "https://www.shop.example/b", "https://shop.example/a", SourceDirect, ""},
		{"google", "https://shop.example/", "https://www.google.com/", SourceSearch, "google.com"},
		{"google uk", "https://shop.example/", "https://www.google.co.uk/", SourceSearch, "google.co.uk"},
		{"bing", "https://shop.example/", "https://www.bing.com/search?q=x", SourceSearch, "bing.com"},
		{"duckduckgo", "https://shop.example/", "https://duckduckgo.com/", SourceSearch, "duckduckgo.com"},
		{"gmail", "https://shop.example/", "https://mail.google.com/", SourceEmail, "mail.google.com"},
		{"google docs", "https://shop.example/", "https://docs.google.com/d/1", SourceReferral, "docs.google.com"},
		{"facebook", "https://shop.example/", "https://l.facebook.com/l.php", SourceSocial, "l.facebook.com"},
		{"t.co", "https://shop.example/", "https://t.co/abc", SourceSocial, "t.co"},
		{"hn", "https://shop.example/", "https://news.ycombinator.com/item?id=1", SourceSocial, "news.ycombinator.com"},
		{"not x.com", "https://shop.example/", "https://box.com/", SourceReferral, "box.com"},
		{"blog", "https://shop.example/", "https://blog.other.example/post", SourceReferral, "blog.other.example"},
		{"paid medium", "https://shop.example/?utm_source=google&utm_medium=cpc", "https://www.google.com/", SourcePaid, "google.com"},
		{"gclid", "https://shop.example/?gclid=abc", "", SourcePaid, ""},
		{"email medium", "https://shop.example/?utm_source=weekly&utm_medium=email", "", SourceEmail, ""},
		{"newsletter source", "https://shop.example/?utm_source=newsletter", "", SourceEmail, ""},
		{"utm social", "https://shop.example/?utm_source=twitter", "", SourceSocial, ""},
		{"utm search host", "https://shop.example/?utm_source=duckduckgo.com", "", SourceSearch, ""},
		{"utm other", "https://shop.example/?utm_source=partner", "", SourceReferral, ""},
		{"bad referrer", "https://shop.example/", "::not a url", SourceDirect, ""},
		{"app referrer", "https://shop.example/", "android-app://com.slack", SourceReferral, "com.slack"},
	} {
		host, utm, click := pageParams(c.page)
		src, h := classify(c.ref, host, &utm, click)
		if src != c.source || h != c.host {
			t.Errorf("%s: got %s %q, want %s %q", c.name, src, h, c.source, c.host)
		}
	}
}

func TestUTM(t *testing.T) {
	_, utm, _ := pageParams("https://shop.example/p?utm_source=news%20letter&utm_medium=email&utm_campaign=spring+sale&utm_term=shoes&utm_content=hero&x=1#frag")
	want := [5]string{"news letter", "email", "spring sale", "shoes", "hero"}
	if utm != want {
		t.Fatalf("got %q, want %q", utm, want)
	}
	_, utm, _ = pageParams("https://shop.example/p?utm_source=" + strings.Repeat("a", 1000))
	if len(utm[0]) != maxValue {
		t.Fatalf("utm_source of %d bytes, want %d", len(utm[0]), maxValue)
	}
	_, utm, _ = pageParams("%zz")
	if utm != ([5]string{}) {
		t.Fatalf("bad URL gave %q", utm)
	}
}

func writeMMDB(t testing.TB) string { return enrichtest.WriteMMDB(t) }

func TestGeo(t *testing.T) {
	e, err := New(Options{GeoIPDB: writeMMDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.HasGeo() || !strings.Contains(e.GeoInfo(), "GeoLite2-City") {
		t.Fatalf("geo info %q", e.GeoInfo())
	}
	for _, c := range []struct{ ip, country, region string }{
		{"81.2.69.160", "GB", "GB-ENG"},
		{"2.125.160.216", "GB", ""},
		{"127.0.0.1", "DE", "DE-BE"},
		{"::ffff:81.2.69.1", "GB", "GB-ENG"},
		{"2001:db8::1", "US", "US-CA"},
		{"8.8.8.8", "", ""},
	} {
		r := e.Lookup([]byte(`{}`), Request{IP: netip.MustParseAddr(c.ip)})
		if r.Country != c.country || r.Region != c.region {
			t.Errorf("%s: got %q %q, want %q %q", c.ip, r.Country, r.Region, c.country, c.region)
		}
	}
	if _, err := New(Options{GeoIPDB: filepath.Join(t.TempDir(), "missing.mmdb")}); err == nil {
		t.Fatal("a missing database opened")
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func TestEnrichNative(t *testing.T) {
	e := testEnricher(t)
	props := `{"url":"https://shop.example/p?utm_source=newsletter&utm_medium=email","path":"/p","referrer":"https://mail.google.com/",` +
		`"$browser":"Forged","$bot":false,"$country":"XX","utm_source":"old","utm_term":"kept","plan":"pro"}`
	out := e.Enrich([]byte(props), Request{UserAgent: uaChromeWin, IP: netip.MustParseAddr("81.2.69.160")})
	m := decode(t, out)
	want := map[string]any{"url": "https://shop.example/p?utm_source=newsletter&utm_medium=email", "path": "/p",
		"referrer": "https://mail.google.com/", "plan": "pro", "utm_term": "kept",
		"$browser": "Chrome", "$os": "Windows", "$device": "desktop", "$referrer_source": "email",
		"$referrer_host": "mail.google.com", "utm_source": "newsletter", "utm_medium": "email"}
	if len(m) != len(want) {
		t.Fatalf("got %s", out)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s: got %v, want %v (%s)", k, m[k], v, out)
		}
	}
}

func TestEnrichBot(t *testing.T) {
	e := testEnricher(t)
	out := e.Enrich([]byte(`{}`), Request{UserAgent: uaGooglebot})
	m := decode(t, out)
	if m["$bot"] != true || m["$device"] != "bot" || m["$browser"] != "Googlebot" || m["$referrer_source"] != "direct" {
		t.Fatalf("got %s", out)
	}
	if m := decode(t, e.Enrich(nil, Request{UserAgent: uaGooglebot})); m["$bot"] != true {
		t.Fatalf("nil properties: %v", m)
	}
	// No user agent: no agent fields and no $bot.
	out = e.Enrich([]byte(`{"$bot":true}`), Request{})
	if m := decode(t, out); len(m) != 1 || m["$referrer_source"] != "direct" {
		t.Fatalf("got %s", out)
	}
}

func TestEnrichSegmentContext(t *testing.T) {
	e, err := New(Options{GeoIPDB: writeMMDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	props := `{"name":"Home","$context":{"userAgent":"` + uaIPhone + `","ip":"2001:db8::7",` +
		`"page":{"url":"https://shop.example/?utm_source=twitter","referrer":"https://t.co/x"},` +
		`"campaign":{"name":"launch","source":"ignored","medium":"social"}}}`
	// The request is the relaying server's: the context wins.
	out := e.Enrich([]byte(props), Request{UserAgent: "analytics-node/1.0", IP: netip.MustParseAddr("81.2.69.160")})
	m := decode(t, out)
	for k, v := range map[string]any{"$browser": "Mobile Safari", "$os": "iOS", "$device": "mobile",
		"$referrer_source": "social", "$referrer_host": "t.co", "utm_source": "twitter", "utm_medium": "social",
		"utm_campaign": "launch", "$country": "US", "$region": "US-CA"} {
		if m[k] != v {
			t.Errorf("%s: got %v, want %v (%s)", k, m[k], v, out)
		}
	}
	if _, ok := m["$bot"]; ok {
		t.Errorf("$bot set: %s", out)
	}
}

func TestApplyEscapes(t *testing.T) {
	r := Result{ReferrerSource: "referral", ReferrerHost: "a\"b", UTM: [5]string{"x\\y"}}
	out := Apply([]byte(`{"a\"k":1}`), &r)
	m := decode(t, out)
	if m[`a"k`] != 1.0 || m["$referrer_host"] != `a"b` || m["utm_source"] != `x\y` {
		t.Fatalf("got %s", out)
	}
}

func BenchmarkEnrichCached(b *testing.B) {
	e := testEnricher(b)
	props := []byte(`{"url":"https://shop.example/p?utm_source=newsletter","path":"/p","referrer":"https://www.google.com/","title":"P","screen_width":1440,"screen_height":900}`)
	req := Request{UserAgent: uaChromeWin}
	e.Enrich(props, req)
	b.ReportAllocs()
	for b.Loop() {
		e.Enrich(props, req)
	}
}

func BenchmarkEnrichCachedGeo(b *testing.B) {
	e, err := New(Options{GeoIPDB: writeMMDB(b)})
	if err != nil {
		b.Fatal(err)
	}
	props := []byte(`{"url":"https://shop.example/p?utm_source=newsletter","path":"/p","referrer":"https://www.google.com/","title":"P","screen_width":1440,"screen_height":900}`)
	req := Request{UserAgent: uaChromeWin, IP: netip.MustParseAddr("81.2.69.160")}
	e.Enrich(props, req)
	b.ReportAllocs()
	for b.Loop() {
		e.Enrich(props, req)
	}
}

func BenchmarkAgentCached(b *testing.B) {
	e := testEnricher(b)
	e.Agent(uaChromeWin)
	b.ReportAllocs()
	for b.Loop() {
		e.Agent(uaChromeWin)
	}
}

// BenchmarkAgentUncached parses every time (the cost of a user agent not
// seen among the last DefaultCacheSize). uap-go keeps caches of its own,
// so the user agent differs on each call.
func BenchmarkAgentUncached(b *testing.B) {
	e := testEnricher(b)
	uas := []string{uaChromeWin, uaIPhone, uaAndroid, uaSafariMac, uaFirefoxLin, uaGooglebot}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		e.ParseAgent(uas[i%len(uas)] + " v" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)))
	}
}

// TestParseBudget: uncached parses are bounded; cached user agents are
// always answered.
func TestParseBudget(t *testing.T) {
	b := parseBudget{rate: 3}
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if !b.take(t0) {
			t.Fatalf("parse %d refused within the burst", i)
		}
	}
	if b.take(t0) {
		t.Fatal("a fourth parse in the same instant was allowed")
	}
	if !b.take(t0.Add(400 * time.Millisecond)) { // 1.2 tokens back
		t.Fatal("no parse after the bucket refilled")
	}
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.budget = parseBudget{rate: 1}
	if _, ok := e.Agent(uaChromeWin); !ok {
		t.Fatal("first parse refused")
	}
	if _, ok := e.Agent(uaChromeWin + " x"); ok {
		t.Fatal("an uncached user agent past the budget was parsed")
	}
	if a, ok := e.Agent(uaChromeWin); !ok || a.Browser != "Chrome" {
		t.Fatalf("a cached user agent past the budget: %+v %v", a, ok)
	}
}
