package enrich

import (
	"strings"
	"sync"
	"time"

	"github.com/ua-parser/uap-go/uaparser"
	"github.com/x-way/crawlerdetect"
)

// Agent is what a user-agent string tells: uap-core family names for the
// browser and OS, the device type, and whether it is a bot.
type Agent struct {
	Browser string // uap-core user-agent family: Chrome, Firefox, Safari, Mobile Safari, Chrome Mobile, Googlebot, ...
	OS      string // uap-core OS family: Windows, Mac OS X, iOS, Android, Linux, ...
	Device  string // desktop, mobile, tablet, bot or other
	Bot     bool
}

// Agent parses a user agent, from the cache when it was seen recently. ok
// is false when the user agent is not cached and the parse budget is spent:
// the event is then stored without agent fields rather than costing up to
// a millisecond of CPU for each of a flood of new user agents.
func (e *Enricher) Agent(ua string) (a Agent, ok bool) {
	if len(ua) > maxUserAgent {
		ua = ua[:maxUserAgent]
	}
	if a, ok := e.agents.Get(ua); ok {
		return a, true
	}
	if !e.budget.take(time.Now()) {
		return Agent{}, false
	}
	a = e.ParseAgent(ua)
	e.agents.Add(strings.Clone(ua), a)
	return a, true
}

// parseBudget is a token bucket of uncached user-agent parses: at most
// ParsesPerSecond on average, bursts of as many. Most traffic repeats a
// few thousand user agents (the cache); a client that invents a new one per
// request is what it bounds.
type parseBudget struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

// ParsesPerSecond bounds uncached user-agent parses (0.1-1.5 ms each): at
// most about a fifth of a core in the worst case.
const ParsesPerSecond = 200

func (b *parseBudget) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.tokens = b.rate
	} else {
		b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// ParseAgent parses a user agent without the cache (0.1 to 1 ms).
func (e *Enricher) ParseAgent(ua string) Agent {
	if len(ua) > maxUserAgent {
		ua = ua[:maxUserAgent]
	}
	// The three parsers directly, not Parse: it runs them on three goroutines.
	e.uap.RLock()
	b := e.uap.ParseUserAgent(ua)
	o := e.uap.ParseOs(ua)
	d := e.uap.ParseDevice(ua)
	e.uap.RUnlock()
	a := Agent{Browser: b.Family, OS: o.Family}
	a.Bot = d.Family == "Spider" || crawlerdetect.IsCrawler(ua)
	if a.Bot {
		a.Device = DeviceBot
	} else {
		a.Device = deviceType(ua, o, d)
	}
	return a
}

// deviceType maps uap-core's OS and device families onto the contract's
// device types. uap-core names devices (iPhone, iPad, SM-X700, Mac), not
// their form: a tablet is an iPad, a device uap-core brands
// Generic_Android_Tablet or names a tablet or Kindle, or an Android device
// whose user agent lacks "Mobile" (Google's rule for Android browsers); a
// phone is any other iOS or Android device or a phone OS; a desktop is a
// desktop OS on no named device but a Mac; anything else is other.
func deviceType(ua string, o *uaparser.Os, d *uaparser.Device) string {
	fam := d.Family
	switch {
	case fam == "iPad" || d.Brand == "Generic_Android_Tablet" ||
		strings.Contains(fam, "Tablet") || strings.HasPrefix(fam, "Kindle"):
		return DeviceTablet
	}
	switch o.Family {
	case "iOS":
		return DeviceMobile
	case "Android":
		if !strings.Contains(ua, "Mobile") {
			return DeviceTablet
		}
		return DeviceMobile
	case "Windows Phone", "BlackBerry OS", "KaiOS", "Symbian OS", "Firefox OS", "Tizen", "webOS", "Sailfish":
		return DeviceMobile
	case "Windows", "Mac OS X", "Linux", "Ubuntu", "Chrome OS", "ChromeOS", "Fedora", "Debian",
		"FreeBSD", "OpenBSD", "NetBSD", "Red Hat", "Arch Linux", "Mint", "Gentoo", "openSUSE", "CentOS", "Solaris":
		if fam == "Other" || fam == "Mac" {
			return DeviceDesktop
		}
	}
	if fam == "iPhone" || fam == "iPod" || d.Brand == "Generic_Android" || strings.Contains(fam, "Phone") {
		return DeviceMobile
	}
	return DeviceOther
}
