package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// send makes one signed request; it follows no redirect.
func (w *Webhooks) send(client *http.Client, url string, keys [][]byte, msgID string, body []byte, now time.Time) (Attempt, time.Duration) {
	att := Attempt{At: msText(now.UnixMilli())}
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		att.Error = err.Error()
		return att, 0
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	// Lower-case names, as the Standard Webhooks spec writes them.
	req.Header["webhook-id"] = []string{msgID}
	req.Header["webhook-timestamp"] = []string{ts}
	req.Header["webhook-signature"] = []string{SignWebhook(keys, msgID, ts, body)}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "eventd-webhooks/1")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		att.LatencyMs = time.Since(start).Milliseconds()
		att.Error = sendError(err)
		w.latency.Observe(time.Since(start).Seconds())
		return att, 0
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, responseExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	_ = resp.Body.Close()
	att.LatencyMs = time.Since(start).Milliseconds()
	w.latency.Observe(time.Since(start).Seconds())
	att.Status = resp.StatusCode
	att.Response = strings.ToValidUTF8(string(excerpt), "\uFFFD")
	return att, parseRetryAfter(resp.Header.Get("Retry-After"), now)
}

// sendError keeps the useful part of a client error for the log.
func sendError(err error) string {
	var ue interface{ Unwrap() error }
	msg := err.Error()
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			msg = inner.Error()
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "Client.Timeout") {
		return "timeout"
	}
	return msg
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or unusable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return min(time.Duration(n)*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// WebhookAddrAllowed is the SSRF guard: may an endpoint reach addr? Live
// endpoints reach public addresses only, unless allowPrivate; test
// endpoints also reach loopback and private networks (RFC 1918, ULA, shared
// 100.64/10). Unspecified, broadcast and multicast addresses are never
// reachable; link-local (cloud metadata) and the other special-purpose ranges
// (see publicAddr) only with allowPrivate.
func WebhookAddrAllowed(addr netip.Addr, test, allowPrivate bool) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() || addr.IsInterfaceLocalMulticast() {
		return false
	}
	if addr.Is4() && (addr.As4()[0] == 0 || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return false
	}
	if publicAddr(addr) {
		return true
	}
	if allowPrivate {
		return true
	}
	if test && !addr.IsLinkLocalUnicast() {
		return addr.IsLoopback() || addr.IsPrivate() || cgnat.Contains(addr)
	}
	return false
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// publicAddr reports a globally reachable unicast address. The special
// ranges come from code.dny.dev/ssrf, generated from the IANA special-purpose
// registries: IPv4 private, shared, loopback, link-local, documentation,
// benchmarking, 6to4-relay anycast, AS112, reserved and multicast ranges; for
// IPv6 everything outside 2000::/3 (so ::/96 IPv4-compatible addresses such
// as ::127.0.0.1, NAT64, ULA and link-local) plus the special ranges inside
// it (2001::/23 with Teredo, 6to4 2002::/16, documentation).
func publicAddr(a netip.Addr) bool {
	if a.Is4() {
		for _, p := range ssrf.IPv4DeniedPrefixes {
			if p.Contains(a) {
				return false
			}
		}
		return true
	}
	if !ssrf.IPv6GlobalUnicast.Contains(a) {
		return false
	}
	for _, p := range ssrf.IPv6DeniedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// errBlockedAddr refuses a connection to an address the SSRF guard forbids.
var errBlockedAddr = errors.New("address not allowed for webhooks")

// newWebhookClient checks every address at dial time, after DNS resolution,
// so a hostname that resolves (or re-resolves) to a private address is
// refused; it uses no proxy and follows no redirect.
func newWebhookClient(timeout time.Duration, allowed func(netip.Addr) bool) *http.Client {
	dialer := &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", errBlockedAddr, address)
			}
			if !allowed(ap.Addr()) {
				return fmt.Errorf("%w: %s", errBlockedAddr, ap.Addr())
			}
			return nil
		},
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   DefaultWebhookConcurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
