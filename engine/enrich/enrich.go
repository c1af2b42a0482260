// Package enrich derives the web-analytics properties the server sets on an
// event at ingest (contract section 13): the browser, OS and device type of
// the user agent, whether it is a bot, the referrer's source group and host,
// the UTM parameters of the page URL, and the country and region of the
// client IP. It runs in the request goroutine before the event is handed to
// the engine, never inside the synced commit; the IP is read and forgotten.
//
// User agents are parsed with uap-go (the Go port of ua-parser's uap-core,
// whose family names the contract uses) and checked against crawlerdetect's
// list of crawlers; a bounded LRU keyed by the user-agent string keeps the
// results, since parsing one costs about a millisecond of regular
// expressions and a site sees few distinct user agents. The country comes
// from a MaxMind-format .mmdb (GeoLite2 or DB-IP Lite, City or Country)
// read with maxminddb-golang.
package enrich

import (
	"fmt"
	"net/netip"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/oschwald/maxminddb-golang/v2"
	"github.com/ua-parser/uap-go/uaparser"

	"github.com/eventd/eventd/engine/event"
)

// The properties the server sets. A client-sent member with one of the
// Reserved names is dropped from an enriched event (then set again when
// the server has a value); utm_* members are replaced only when the page
// URL (or a Segment message's context.campaign) carries that parameter.
const (
	PropBrowser        = "$browser"
	PropOS             = "$os"
	PropDevice         = "$device"
	PropBot            = "$bot"
	PropReferrerSource = "$referrer_source"
	PropReferrerHost   = "$referrer_host"
	PropCountry        = "$country"
	PropRegion         = "$region"
)

// Reserved are the $-prefixed names the server sets.
var Reserved = [...]string{PropBrowser, PropOS, PropDevice, PropBot, PropReferrerSource, PropReferrerHost, PropCountry, PropRegion}

// UTMParams are the campaign parameters copied from the page URL's query, in output order.
var UTMParams = [...]string{"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content"}

// Device types ($device).
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceBot     = "bot"
	DeviceOther   = "other"
)

// DefaultCacheSize is how many distinct user agents stay parsed.
const DefaultCacheSize = 4096

// maxUserAgent bounds the user-agent text parsed and used as a cache key:
// real ones are a few hundred bytes; a longer one is cut, so a client
// cannot make the cache hold megabytes or the regexps scan them.
const maxUserAgent = 512

// maxValue bounds a UTM value or referrer host copied into the properties.
const maxValue = 256

// Options configures an Enricher.
type Options struct {
	// GeoIPDB is the path of a MaxMind-format .mmdb file; "" gives no country.
	GeoIPDB string
	// CacheSize is the number of user agents kept parsed (0: DefaultCacheSize).
	CacheSize int
}

// Enricher computes enrichment properties; it is safe for concurrent use.
type Enricher struct {
	uap    *uaparser.Parser
	agents *lru.Cache[string, Agent]
	budget parseBudget       // uncached parses (agent.go)
	geo    *maxminddb.Reader // nil without --geoip-db
}

// New loads the user-agent rules (about 50 ms) and opens the GeoIP
// database when one is named.
func New(o Options) (*Enricher, error) {
	n := o.CacheSize
	if n <= 0 {
		n = DefaultCacheSize
	}
	cache, err := lru.New[string, Agent](n)
	if err != nil {
		return nil, err
	}
	e := &Enricher{uap: uaparser.NewFromSaved(), agents: cache, budget: parseBudget{rate: ParsesPerSecond}}
	if o.GeoIPDB != "" {
		r, err := maxminddb.Open(o.GeoIPDB)
		if err != nil {
			return nil, fmt.Errorf("geoip database: %w", err)
		}
		e.geo = r
	}
	return e, nil
}

// Close releases the GeoIP database.
func (e *Enricher) Close() error {
	if e == nil || e.geo == nil {
		return nil
	}
	return e.geo.Close()
}

// HasGeo reports whether a GeoIP database is open.
func (e *Enricher) HasGeo() bool { return e != nil && e.geo != nil }

// GeoInfo describes the open database (type and build date) for the start log.
func (e *Enricher) GeoInfo() string {
	if !e.HasGeo() {
		return ""
	}
	m := e.geo.Metadata
	return fmt.Sprintf("%s built %s", m.DatabaseType, m.BuildTime().UTC().Format("2006-01-02"))
}

// Request is what the HTTP request tells about the visitor: its
// User-Agent header and the client address. Both are zero when the request
// is not the visitor's own (a server-side sender with a secret key).
type Request struct {
	UserAgent string
	IP        netip.Addr
}

// Result is the enrichment of one event; empty strings are absent fields.
type Result struct {
	HasAgent       bool
	Agent          Agent
	ReferrerSource string
	ReferrerHost   string
	UTM            [len(UTMParams)]string
	Country        string
	Region         string
}

// Lookup computes the enrichment of an event from its properties (compact
// JSON, as the decoder produces) and the request. A Segment message's
// $context.userAgent and $context.ip win over the request's, as they name
// the visitor when a server relays its events.
func (e *Enricher) Lookup(props []byte, req Request) Result {
	src := readSources(props)
	ua := req.UserAgent
	if src.userAgent != "" {
		ua = src.userAgent
	}
	ip := req.IP
	if src.ip != "" {
		if a, err := netip.ParseAddr(strings.TrimSpace(src.ip)); err == nil {
			ip = a
		}
	}
	var r Result
	if ua != "" {
		r.Agent, r.HasAgent = e.Agent(ua)
	}
	pageHost := ""
	if src.url != "" {
		var clickID bool
		pageHost, r.UTM, clickID = pageParams(src.url)
		for i, v := range src.campaign {
			if r.UTM[i] == "" {
				r.UTM[i] = v
			}
		}
		r.ReferrerSource, r.ReferrerHost = classify(src.referrer, pageHost, &r.UTM, clickID)
	} else {
		r.UTM = src.campaign
		r.ReferrerSource, r.ReferrerHost = classify(src.referrer, "", &r.UTM, false)
	}
	if e.HasGeo() && ip.IsValid() {
		r.Country, r.Region = e.lookupGeo(ip)
	}
	return r
}

// Enrich returns props with the enrichment of Lookup applied (Apply).
func (e *Enricher) Enrich(props []byte, req Request) []byte {
	r := e.Lookup(props, req)
	return Apply(props, &r)
}

// sources are the members of an event's properties that enrichment reads.
type sources struct {
	url, referrer string
	userAgent, ip string // Segment's context
	campaign      [len(UTMParams)]string
}

// readSources reads url and referrer, and from a Segment message's
// $context: userAgent, ip, page.url, page.referrer (when the properties
// have none) and campaign (analytics.js's UTM parameters).
func readSources(props []byte) sources {
	var s sources
	var ctx []byte
	_ = event.EachMember(props, func(key, val []byte) bool {
		switch string(key) {
		case "url":
			s.url, _ = event.StringValue(val)
		case "referrer":
			s.referrer, _ = event.StringValue(val)
		case "$context":
			ctx = val
		}
		return true
	})
	if len(ctx) == 0 || ctx[0] != '{' {
		return s
	}
	_ = event.EachMember(ctx, func(key, val []byte) bool {
		switch string(key) {
		case "userAgent":
			s.userAgent, _ = event.StringValue(val)
		case "ip":
			s.ip, _ = event.StringValue(val)
		case "page":
			if len(val) > 0 && val[0] == '{' {
				_ = event.EachMember(val, func(k, v []byte) bool {
					switch string(k) {
					case "url":
						if s.url == "" {
							s.url, _ = event.StringValue(v)
						}
					case "referrer":
						if s.referrer == "" {
							s.referrer, _ = event.StringValue(v)
						}
					}
					return true
				})
			}
		case "campaign":
			if len(val) > 0 && val[0] == '{' {
				_ = event.EachMember(val, func(k, v []byte) bool {
					i := -1
					switch string(k) {
					case "source":
						i = 0
					case "medium":
						i = 1
					case "name", "campaign":
						i = 2
					case "term":
						i = 3
					case "content":
						i = 4
					}
					if i >= 0 {
						str, _ := event.StringValue(v)
						s.campaign[i] = clip(strings.TrimSpace(str))
					}
					return true
				})
			}
		}
		return true
	})
	return s
}

// Apply rewrites props: members named in Reserved are dropped, utm_*
// members the result sets are replaced, and the result's fields are
// appended ($browser, $os, $device, $bot, $referrer_source,
// $referrer_host, utm_*, $country, $region; absent ones left out).
func Apply(props []byte, r *Result) []byte {
	if len(props) == 0 {
		props = []byte("{}") // no properties at all: the enrichment alone
	}
	out := make([]byte, 0, len(props)+160)
	out = append(out, '{')
	n := 0
	err := event.EachMember(props, func(key, val []byte) bool {
		if dropped(key, r) {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = event.AppendString(out, string(key))
		out = append(out, ':')
		out = append(out, val...)
		return true
	})
	if err != nil {
		return props // not an object: the decoder never hands one over
	}
	str := func(name, v string) {
		if v == "" {
			return
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = event.AppendString(out, name)
		out = append(out, ':')
		out = event.AppendString(out, v)
	}
	if r.HasAgent {
		str(PropBrowser, r.Agent.Browser)
		str(PropOS, r.Agent.OS)
		str(PropDevice, r.Agent.Device)
		if r.Agent.Bot {
			if n > 0 {
				out = append(out, ',')
			}
			n++
			out = append(out, `"$bot":true`...)
		}
	}
	str(PropReferrerSource, r.ReferrerSource)
	str(PropReferrerHost, r.ReferrerHost)
	for i, name := range UTMParams {
		str(name, r.UTM[i])
	}
	str(PropCountry, r.Country)
	str(PropRegion, r.Region)
	return append(out, '}')
}

func dropped(key []byte, r *Result) bool {
	if len(key) == 0 {
		return false
	}
	if key[0] == '$' {
		for _, name := range Reserved {
			if string(key) == name {
				return true
			}
		}
		return false
	}
	for i, name := range UTMParams {
		if string(key) == name {
			return r.UTM[i] != ""
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > maxValue {
		s = strings.ToValidUTF8(s[:maxValue], "")
	}
	return s
}
