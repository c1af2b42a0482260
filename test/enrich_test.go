package test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/eventd/eventd/engine/enrich/enrichtest"
)

const (
	enChrome    = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	enIPhone    = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
	enGooglebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
)

// enProps reads an event's properties with a secret key.
func enProps(t *testing.T, s *Server, secret, id string) map[string]any {
	t.Helper()
	r := Do(t, "GET", s.Public+"/events/"+id, secret, nil)
	wantStatus(t, r, 200)
	var ev struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(r.Body, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.Properties
}

func enWant(t *testing.T, props map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got, ok := props[k]
		if v == nil {
			if ok {
				t.Errorf("%s: got %v, want absent (%v)", k, got, props)
			}
			continue
		}
		if got != v {
			t.Errorf("%s: got %v, want %v (%v)", k, got, v, props)
		}
	}
}

// enSegmentEvent finds the one event of a name and returns its id.
func enOneID(t *testing.T, s *Server, secret, query string) string {
	t.Helper()
	r := Do(t, "GET", s.Public+"/events?"+query, secret, nil)
	wantStatus(t, r, 200)
	var l struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &l); err != nil || len(l.Data) != 1 {
		t.Fatalf("%s: %s", query, r.Body)
	}
	return l.Data[0].ID
}

// TestEnrichment: pageviews and public-key events get the server's
// $-properties at ingest (contract section 13), bots are flagged and
// stored, a client's $browser is overwritten, --geoip-db gives a country.
func TestEnrichment(t *testing.T) {
	s := Start(t, "--geoip-db", enrichtest.WriteMMDB(t))
	if !strings.Contains(s.Logs(), "geoip database loaded") {
		t.Errorf("start log does not name the database:\n%s", s.Logs())
	}
	proj := s.Project(t, "enrich", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	public := s.Key(t, proj, "public", "live")

	t.Run("a Chrome pageview is enriched and a client's $browser overwritten", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/events", public, map[string]any{"event": "pageview", "visitor_id": "v-chrome",
			"properties": map[string]any{"url": "https://shop.example/p?utm_source=newsletter&utm_medium=email&utm_campaign=spring",
				"path": "/p", "referrer": "https://www.google.com/", "$browser": "Forged", "$bot": true, "$country": "XX"}},
			"User-Agent: "+enChrome)
		wantStatus(t, r, 201)
		props := enProps(t, s, secret, r.JSON(t)["id"].(string))
		enWant(t, props, map[string]any{"$browser": "Chrome", "$os": "Windows", "$device": "desktop", "$bot": nil,
			"$referrer_source": "email", "$referrer_host": "google.com", "utm_source": "newsletter",
			"utm_medium": "email", "utm_campaign": "spring", "$country": "DE", "$region": "DE-BE", "path": "/p"})
	})

	t.Run("a Googlebot pageview is stored with $bot true", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/events/batch", public, map[string]any{"events": []any{
			map[string]any{"event": "pageview", "visitor_id": "v-bot", "properties": map[string]any{"url": "https://shop.example/"}},
		}}, "User-Agent: "+enGooglebot)
		wantStatus(t, r, 201)
		id := enOneID(t, s, secret, "visitor_id=v-bot")
		enWant(t, enProps(t, s, secret, id), map[string]any{"$bot": true, "$device": "bot", "$browser": "Googlebot",
			"$referrer_source": "direct", "$referrer_host": nil})
	})

	t.Run("a public key's custom event is enriched too", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/events", public, map[string]any{"event": "signup", "visitor_id": "v-chrome"},
			"User-Agent: "+enIPhone)
		wantStatus(t, r, 201)
		enWant(t, enProps(t, s, secret, r.JSON(t)["id"].(string)), map[string]any{"$browser": "Mobile Safari",
			"$os": "iOS", "$device": "mobile", "$country": "DE"})
	})

	t.Run("a Segment page relayed with a secret key takes the context's user agent and ip", func(t *testing.T) {
		msg := map[string]any{"anonymousId": "a-seg", "name": "Home", "messageId": "en-seg-1",
			"properties": map[string]any{"url": "https://shop.example/?utm_source=twitter", "referrer": "https://t.co/x"},
			"context":    map[string]any{"userAgent": enIPhone, "ip": "81.2.69.160"}}
		wantStatus(t, Do(t, "POST", s.Public+"/v1/page", secret, msg, "User-Agent: analytics-node/2.0"), 200)
		id := enOneID(t, s, secret, "visitor_id=a-seg")
		enWant(t, enProps(t, s, secret, id), map[string]any{"$browser": "Mobile Safari", "$os": "iOS",
			"$device": "mobile", "$referrer_source": "social", "$referrer_host": "t.co", "utm_source": "twitter",
			"$country": "GB", "$region": "GB-ENG", "$bot": nil})
	})

	t.Run("a secret key's pageview without context gets no user-agent or country fields", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/events", secret, map[string]any{"event": "pageview", "visitor_id": "v-srv",
			"properties": map[string]any{"url": "https://shop.example/", "referrer": "https://news.ycombinator.com/"}},
			"User-Agent: "+enChrome)
		wantStatus(t, r, 201)
		enWant(t, enProps(t, s, secret, r.JSON(t)["id"].(string)), map[string]any{"$browser": nil, "$device": nil,
			"$country": nil, "$referrer_source": "social", "$referrer_host": "news.ycombinator.com"})
	})

	t.Run("a secret key's other events are stored as sent", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/events", secret, map[string]any{"event": "purchase", "visitor_id": "v-srv",
			"properties": map[string]any{"amount": 5, "$browser": "kept"}}, "User-Agent: "+enChrome)
		wantStatus(t, r, 201)
		props := enProps(t, s, secret, r.JSON(t)["id"].(string))
		if len(props) != 2 || props["$browser"] != "kept" {
			t.Fatalf("properties %v", props)
		}
	})
}

// TestEnrichmentNoGeoIP: without --geoip-db the start log says so once and
// events have no country; a --geoip-db that cannot be read stops the start.
func TestEnrichmentNoGeoIP(t *testing.T) {
	s := Start(t)
	if n := strings.Count(s.Logs(), "no --geoip-db"); n != 1 {
		t.Errorf("the start log says %d times that there is no GeoIP database:\n%s", n, s.Logs())
	}
	proj := s.Project(t, "enrich-nogeo", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	public := s.Key(t, proj, "public", "live")
	r := Do(t, "POST", s.Public+"/events", public, map[string]any{"event": "pageview", "visitor_id": "v-1",
		"properties": map[string]any{"url": "https://shop.example/"}}, "User-Agent: "+enChrome)
	wantStatus(t, r, 201)
	enWant(t, enProps(t, s, secret, r.JSON(t)["id"].(string)), map[string]any{"$browser": "Chrome", "$country": nil, "$region": nil})

	out, err := exec.Command(binary, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--admin-token", "adm_test_token_0123456789", "--geoip-db", t.TempDir()+"/missing.mmdb").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--geoip-db") {
		t.Fatalf("a missing --geoip-db: %v\n%s", err, out)
	}
}
