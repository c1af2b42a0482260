package enrich

import (
	"net/url"
	"strings"
)

// Referrer source groups ($referrer_source), after Plausible's and GA4's
// channel grouping reduced to six: paid (a paid-campaign utm_medium or an
// ad click id in the page URL), email (an email utm_medium or utm_source,
// or a webmail referrer), search (a search engine referrer or utm_source),
// social (a social network's), referral (any other site, or an unknown
// utm_source) and direct (no referrer from another host and no campaign).
const (
	SourceDirect   = "direct"
	SourceSearch   = "search"
	SourceSocial   = "social"
	SourceEmail    = "email"
	SourcePaid     = "paid"
	SourceReferral = "referral"
)

// pageParams reads the page URL: its host (for telling internal referrers
// apart), its utm_* parameters and whether it carries an ad click id.
func pageParams(raw string) (host string, utm [len(UTMParams)]string, clickID bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", utm, false
	}
	host = normHost(u.Hostname())
	q, _ := url.ParseQuery(u.RawQuery) // keeps what parsed
	for i, name := range UTMParams {
		utm[i] = clip(strings.TrimSpace(q.Get(name)))
	}
	for _, id := range clickIDs {
		if q.Has(id) {
			clickID = true
		}
	}
	return host, utm, clickID
}

// clickIDs are the query parameters ad networks add to a paid click.
var clickIDs = [...]string{"gclid", "gbraid", "wbraid", "dclid", "msclkid", "twclid", "li_fat_id", "ttclid"}

// paidMedia are utm_medium values of paid traffic (GA4's paid channels).
var paidMedia = map[string]bool{"cpc": true, "ppc": true, "cpm": true, "cpv": true, "cpa": true, "cpp": true,
	"paid": true, "paidsearch": true, "paid_search": true, "paid-search": true, "paidsocial": true,
	"paid_social": true, "paid-social": true, "display": true, "banner": true, "retargeting": true, "ads": true}

// classify groups a visit by its referrer and campaign; host is the
// referrer's host (lower case, without "www."), "" when direct or internal.
func classify(referrer, pageHost string, utm *[len(UTMParams)]string, clickID bool) (source, host string) {
	if referrer != "" {
		if u, err := url.Parse(strings.TrimSpace(referrer)); err == nil && u.Host != "" {
			host = clip(normHost(u.Hostname()))
		}
	}
	if host != "" && host == pageHost {
		host = "" // a link within the site: no referrer of its own
	}
	medium, src := strings.ToLower(utm[1]), strings.ToLower(utm[0])
	switch {
	case clickID || paidMedia[medium]:
		return SourcePaid, host
	case isEmail(medium) || isEmail(src):
		return SourceEmail, host
	}
	if host != "" {
		if g := hostGroup(host); g != "" {
			return g, host
		}
		return SourceReferral, host
	}
	if src != "" {
		if g := hostGroup(src); g != "" {
			return g, host
		}
		for _, s := range searchNames {
			if src == s {
				return SourceSearch, host
			}
		}
		for _, s := range socialNames {
			if src == s {
				return SourceSocial, host
			}
		}
		return SourceReferral, host
	}
	return SourceDirect, ""
}

func isEmail(s string) bool {
	return s == "email" || s == "e-mail" || s == "e_mail" || s == "mail" || s == "newsletter" ||
		strings.Contains(s, "email") || strings.Contains(s, "newsletter")
}

func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return strings.TrimPrefix(h, "www.")
}

// hostGroup is the group of a referrer host: webmail first (mail.google.com
// is not Google search), then search engines (any country domain of the
// multi-country ones: google.co.uk, yandex.ru), then social networks.
func hostGroup(host string) string {
	if matchHost(host, webmailHosts) {
		return SourceEmail
	}
	if matchHost(host, searchHosts) {
		return SourceSearch
	}
	first := host
	if i := strings.IndexByte(host, '.'); i > 0 {
		first = host[:i]
	}
	for _, s := range searchCountryNames {
		if first == s && strings.Contains(host, ".") {
			return SourceSearch
		}
	}
	if matchHost(host, socialHosts) {
		return SourceSocial
	}
	return ""
}

// matchHost reports whether host is one of hosts or a subdomain of one.
func matchHost(host string, hosts []string) bool {
	for _, h := range hosts {
		if host == h || (len(host) > len(h) && strings.HasSuffix(host, h) && host[len(host)-len(h)-1] == '.') {
			return true
		}
	}
	return false
}

// The host lists, after Plausible's and Matomo's referrer lists. No
// maintained Go module ships such a list (Snowplow's referer-parser port
// is not served by the module proxy), so the major ones are named here;
// every other host is a referral.
var (
	searchCountryNames = []string{"google", "yahoo", "yandex", "bing"}
	searchHosts        = []string{"search.yahoo.com", "bing.com", "duckduckgo.com", "baidu.com", "ecosia.org",
		"search.brave.com", "qwant.com", "startpage.com", "naver.com", "seznam.cz", "search.seznam.cz",
		"sogou.com", "so.com", "kagi.com", "ask.com", "search.aol.com", "yandex.com", "ya.ru", "perplexity.ai",
		"presearch.com", "mojeek.com", "you.com", "search.naver.com", "daum.net", "coccoc.com"}
	searchNames = []string{"google", "bing", "duckduckgo", "yahoo", "yandex", "baidu", "ecosia", "brave", "qwant"}
	socialHosts = []string{"facebook.com", "fb.com", "fb.me", "instagram.com", "t.co", "twitter.com", "x.com",
		"linkedin.com", "lnkd.in", "reddit.com", "pinterest.com", "youtube.com", "youtu.be", "tiktok.com",
		"news.ycombinator.com", "mastodon.social", "bsky.app", "threads.net", "vk.com", "tumblr.com",
		"quora.com", "discord.com", "t.me", "telegram.org", "whatsapp.com", "wa.me", "weibo.com",
		"snapchat.com", "medium.com", "twitch.tv", "lemmy.world", "xing.com", "ok.ru", "line.me", "messenger.com"}
	socialNames  = []string{"facebook", "fb", "instagram", "ig", "twitter", "x", "linkedin", "reddit", "pinterest", "youtube", "tiktok", "hackernews", "mastodon", "bluesky", "threads"}
	webmailHosts = []string{"mail.google.com", "outlook.live.com", "outlook.office.com", "outlook.office365.com",
		"mail.yahoo.com", "mail.proton.me", "mail.protonmail.com", "app.fastmail.com", "mail.yandex.ru",
		"mail.aol.com", "mail.zoho.com", "webmail.gandi.net", "mail.ru", "e.mail.ru", "gmx.net", "web.de"}
)
