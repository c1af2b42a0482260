package bench

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Template is a body with "{n}" placeholders replaced by a number per
// request, so every event differs (visitor ids, skus) without building JSON
// at run time, "{name}" placeholders replaced by an event name picked by
// the number (one of BackfillNames, with their weights), "{uuid}"
// placeholders by a UUID v4 made from the number (as analytics-go and the
// mobile SDKs make their messageIds), and "{now}" placeholders by the time
// the body is built, as analytics-node writes a timestamp.
type Template struct {
	parts [][]byte      // literal text around the placeholders
	kinds []placeholder // kinds[i]: the placeholder before parts[i+1]
}

type placeholder uint8

const (
	phNumber placeholder = iota
	phName
	phUUID
	phNow
)

var placeholders = [...]string{phNumber: "{n}", phName: "{name}", phUUID: "{uuid}", phNow: "{now}"}

// NewTemplate splits text at every placeholder.
func NewTemplate(text string) *Template {
	t := &Template{}
	for {
		at, kind := -1, phNumber
		for k, ph := range placeholders {
			if i := strings.Index(text, ph); i >= 0 && (at < 0 || i < at) {
				at, kind = i, placeholder(k)
			}
		}
		if at < 0 {
			t.parts = append(t.parts, []byte(text))
			return t
		}
		t.parts = append(t.parts, []byte(text[:at]))
		t.kinds = append(t.kinds, kind)
		text = text[at+len(placeholders[kind]):]
	}
}

// AppendTo appends the template with n substituted to dst.
func (t *Template) AppendTo(dst []byte, n uint64) []byte {
	now := t.now()
	for i, p := range t.parts {
		if i > 0 {
			dst = t.kinds[i-1].append(dst, n, now)
		}
		dst = append(dst, p...)
	}
	return dst
}

// AppendBody writes the template with n substituted into req's own body
// buffer, which fasthttp pools, so the hot path does not allocate.
func (t *Template) AppendBody(req *fasthttp.Request, n uint64) { t.appendBody(req, n, t.now()) }

// appendBody is AppendBody with "{now}" as now: a batch's bodies take one
// reading of the clock (a hundred took a fifth of a core of the
// generator, beside the server on two).
func (t *Template) appendBody(req *fasthttp.Request, n uint64, now []byte) {
	var buf [36]byte
	for i, p := range t.parts {
		if i > 0 {
			req.AppendBody(t.kinds[i-1].append(buf[:0], n, now))
		}
		req.AppendBody(p)
	}
}

// now is the time "{now}" stands for, as analytics-node writes it; nil if
// the template has none.
func (t *Template) now() []byte {
	if !slices.Contains(t.kinds, phNow) {
		return nil
	}
	return time.Now().UTC().AppendFormat(nil, segmentTime)
}

func (k placeholder) append(dst []byte, n uint64, now []byte) []byte {
	switch k {
	case phName:
		return append(dst, BackfillName(n)...)
	case phUUID:
		return AppendUUID(dst, n)
	case phNow:
		return append(dst, now...)
	}
	return strconv.AppendUint(dst, n, 10)
}

// AppendUUID appends a UUID v4 made from n: two multiplicative hashes of
// it, so the UUIDs of consecutive numbers are unrelated and random in
// order, as an SDK's are.
func AppendUUID(dst []byte, n uint64) []byte {
	h1, h2 := n*0x9E3779B97F4A7C15, (n+1)*0xC2B2AE3D27D4EB4F
	dst = appendHex(dst, uint64(uint32(h1)), 8)
	dst = append(dst, '-')
	dst = appendHex(dst, uint64(uint16(h1>>32)), 4)
	dst = append(dst, "-4"...)
	dst = appendHex(dst, uint64(uint16(h1>>48)&0xfff), 3)
	dst = append(dst, "-a"...)
	dst = appendHex(dst, uint64(uint16(h2)&0xfff), 3)
	dst = append(dst, '-')
	return appendHex(dst, h2>>16, 12)
}

// appendHex appends v as digits hex digits (its low ones), zero-padded.
func appendHex(dst []byte, v uint64, digits int) []byte {
	const hex = "0123456789abcdef"
	for i := digits - 1; i >= 0; i-- {
		dst = append(dst, hex[(v>>(4*uint(i)))&0xf])
	}
	return dst
}

// WithEventNames returns tmpl with its event name replaced by "{name}":
// the events spread over BackfillNames as real traffic spreads over a few
// names taking most events and a tail of rare ones.
func WithEventNames(tmpl string) string {
	return strings.Replace(tmpl, `"event":"purchase"`, `"event":"{name}"`, 1)
}

// EventTemplate is the default single event: the brief's purchase event with
// a few more properties so it weighs about 220 bytes, the size the design's
// decoder figures were measured with.
const EventTemplate = `{"event":"purchase","visitor_id":"v_{n}","properties":{"amount":12.5,"currency":"EUR","sku":"sku_{n}","quantity":2,"page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_{n}","campaign":"spring_sale"}}`

// PebbleValueSize and PebbleKeySize mirror EventTemplate as stored (a
// compact record of about 200 bytes under keys of about 40 bytes), so the
// storage ceiling writes what eventd writes.
const (
	PebbleValueSize = 200
	PebbleKeySize   = 40
	PebbleKeysEvent = 4
)

// EventRequest posts one event per request to path (POST /events).
func EventRequest(path, key string, tmpl *Template) RequestFunc {
	auth := "Bearer " + key
	return func(seq uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(path)
		req.Header.SetContentType("application/json")
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
		tmpl.AppendBody(req, seq)
	}
}

// EventRequestKeys posts one event per request like EventRequest, request
// seq using key seq % len(keys), so the load spreads evenly over the keys.
func EventRequestKeys(path string, keys []string, tmpl *Template) RequestFunc {
	auths := make([]string, len(keys))
	for i, k := range keys {
		auths[i] = "Bearer " + k
	}
	return func(seq uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(path)
		req.Header.SetContentType("application/json")
		req.Header.Set(fasthttp.HeaderAuthorization, auths[seq%uint64(len(auths))])
		tmpl.AppendBody(req, seq)
	}
}

// BatchRequest posts size events per request to path (POST /events/batch);
// event j of request seq gets number seq*size+j, so no two events share a
// visitor id within a run.
func BatchRequest(path, key string, tmpl *Template, size int) RequestFunc {
	return arrayRequest(path, "Bearer "+key, `{"events":[`, `]}`, tmpl, size)
}

// arrayRequest posts size bodies of tmpl as a JSON array between open and
// closing; entry j of request seq gets number seq*size+j.
func arrayRequest(path, auth, open, closing string, tmpl *Template, size int) RequestFunc {
	comma := []byte(",")
	return func(seq uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(path)
		req.Header.SetContentType("application/json")
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
		req.AppendBodyString(open)
		base := seq * uint64(size)
		now := tmpl.now()
		for j := 0; j < size; j++ {
			if j > 0 {
				req.AppendBody(comma)
			}
			tmpl.appendBody(req, base+uint64(j), now)
		}
		req.AppendBodyString(closing)
	}
}

// IdempotentEventTemplate is EventTemplate with an idempotency_key, as a
// batch entry may carry one.
const IdempotentEventTemplate = `{"event":"purchase","visitor_id":"v_{n}","idempotency_key":"node-next-1764000000000-{n}","properties":{"amount":12.5,"currency":"EUR","sku":"sku_{n}","quantity":2,"page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_{n}","campaign":"spring_sale"}}`

// SegmentShapedTemplate is the native event that SegmentTemplate is stored
// as (the mapped properties, the messageId as idempotency key, the same
// timestamp): what the segment scenario's stored bytes cost without the
// Segment layer.
const SegmentShapedTemplate = `{"event":"Order_Completed","visitor_id":"v_{n}","idempotency_key":"node-next-1764000000000-{n}","timestamp":"{now}","properties":{"amount":12.5,"currency":"EUR","sku":"sku_{n}","quantity":2,"page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_{n}","campaign":"spring_sale","$event_name":"Order Completed","$context":{"library":{"name":"@segment/analytics-node","version":"3.1.0"}},"$user_id":"v_{n}"}}`

// SegmentTemplate is one track message as @segment/analytics-node 3.1
// sends it (a messageId, a context with the library, _metadata and an
// empty integrations object), carrying EventTemplate's properties, so the
// segment scenario compares the same events with the native batch. Its
// timestamp is when the generator builds it, as an SDK stamps a message
// when the application calls it: eventd stores a track message's
// timestamp as sent, so a time fixed when the scenario starts would put
// every event of it in one second, ever further behind its id.
const SegmentTemplate = `{"type":"track","event":"Order Completed","userId":"v_{n}","properties":{"amount":12.5,"currency":"EUR","sku":"sku_{n}","quantity":2,"page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_{n}","campaign":"spring_sale"},"messageId":"node-next-1764000000000-{n}","timestamp":"{now}","context":{"library":{"name":"@segment/analytics-node","version":"3.1.0"}},"_metadata":{"jsRuntime":"node"},"integrations":{}}`

// SegmentUUIDTemplate is SegmentTemplate with the messageId analytics-go
// and the iOS and Android SDKs send: a UUID v4, random in order, where
// analytics-node's start with the time.
var SegmentUUIDTemplate = strings.Replace(SegmentTemplate, `"messageId":"node-next-1764000000000-{n}"`, `"messageId":"{uuid}"`, 1)

// segmentTime is how analytics-node writes a time.
const segmentTime = "2006-01-02T15:04:05.000Z"

// SegmentBatchRequest posts size Segment messages per request to path
// (POST /v1/batch) with the key as HTTP Basic user name, as the SDKs do,
// without a sentAt: it would move only originalTimestamp, which the
// templates do not send.
func SegmentBatchRequest(path, key string, tmpl *Template, size int) RequestFunc {
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(key+":"))
	return arrayRequest(path, auth, `{"batch":[`, `],"writeKey":"bench"}`, tmpl, size)
}

// SegmentAccepted counts the stored messages of a /v1/batch answer:
// {"success":true} stores all of size, each "index" of "rejected" one fewer.
func SegmentAccepted(size int) func(resp *fasthttp.Response) int {
	return func(resp *fasthttp.Response) int {
		b := resp.Body()
		if resp.StatusCode() != fasthttp.StatusOK || !bytes.HasPrefix(b, []byte(`{"success":true`)) {
			return 0
		}
		return size - bytes.Count(b, []byte(`"index":`))
	}
}

// BackfillNames are the event names of the analytics data set and of
// "{name}" in a Template, with skewed frequencies (name i gets about twice
// as many events as name i+1), so a breakdown has a clear order.
var BackfillNames = []string{"page_view", "click", "signup", "add_to_cart", "checkout", "purchase", "refund", "invite"}

// BackfillName picks the name of event k: half are the first name, a quarter
// the second, and so on.
func BackfillName(k uint64) string {
	h := k * 0x9E3779B97F4A7C15
	i := 0
	for i < len(BackfillNames)-1 && h&(1<<uint(63-i)) == 0 {
		i++
	}
	return BackfillNames[i]
}

// BackfillRequest posts batches of size events whose timestamps spread
// evenly over [from, to): event k (k = seq*size + j, modulo total) is at
// from + k·(to-from)/total, with one of BackfillNames and one of visitors
// visitor ids, so analytics has a month of data to read.
func BackfillRequest(path, key string, size int, total uint64, from, to time.Time, visitors uint64) RequestFunc {
	auth := "Bearer " + key
	span := to.Sub(from)
	open := []byte(`{"events":[`)
	closing := []byte(`]}`)
	return func(seq uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(path)
		req.Header.SetContentType("application/json")
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
		req.AppendBody(open)
		var buf [256]byte
		for j := 0; j < size; j++ {
			k := (seq*uint64(size) + uint64(j)) % total
			ts := from.Add(time.Duration(float64(span) * float64(k) / float64(total))).UTC()
			b := buf[:0]
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"event":"`...)
			b = append(b, BackfillName(k)...)
			b = append(b, `","visitor_id":"v_`...)
			b = strconv.AppendUint(b, k%visitors, 10)
			b = append(b, `","timestamp":"`...)
			b = ts.AppendFormat(b, "2006-01-02T15:04:05.000Z")
			b = append(b, `","properties":{"amount":`...)
			b = strconv.AppendUint(b, 1+k%200, 10)
			b = append(b, `,"plan":"`...)
			b = append(b, [...]string{"free", "pro", "team"}[k%3]...)
			b = append(b, `"}}`...)
			req.AppendBody(b)
		}
		req.AppendBody(closing)
	}
}

var acceptedField = []byte(`"accepted":`)

// BatchAccepted reads "accepted" from a batch response, because a batch is
// 201 even when every entry was rejected; a body without it counts zero.
func BatchAccepted(resp *fasthttp.Response) int {
	b := resp.Body()
	i := bytes.Index(b, acceptedField)
	if i < 0 {
		return 0
	}
	b = b[i+len(acceptedField):]
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
