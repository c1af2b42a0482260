package bench

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// Template is a body with "{n}" placeholders replaced by a number per
// request, so every event differs (visitor ids, skus) without building JSON
// at run time.
type Template struct {
	parts [][]byte // literal text around the placeholders
}

// NewTemplate splits text at every "{n}".
func NewTemplate(text string) *Template {
	t := &Template{}
	for _, p := range strings.Split(text, "{n}") {
		t.parts = append(t.parts, []byte(p))
	}
	return t
}

// AppendTo appends the template with n substituted to dst.
func (t *Template) AppendTo(dst []byte, n uint64) []byte {
	for i, p := range t.parts {
		if i > 0 {
			dst = strconv.AppendUint(dst, n, 10)
		}
		dst = append(dst, p...)
	}
	return dst
}

// AppendBody writes the template with n substituted into req's own body
// buffer, which fasthttp pools, so the hot path does not allocate.
func (t *Template) AppendBody(req *fasthttp.Request, n uint64) {
	var num [20]byte
	digits := strconv.AppendUint(num[:0], n, 10)
	for i, p := range t.parts {
		if i > 0 {
			req.AppendBody(digits)
		}
		req.AppendBody(p)
	}
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

// BatchRequest posts size events per request to path (POST /events/batch);
// event j of request seq gets number seq*size+j, so no two events share a
// visitor id within a run.
func BatchRequest(path, key string, tmpl *Template, size int) RequestFunc {
	auth := "Bearer " + key
	open := []byte(`{"events":[`)
	comma := []byte(",")
	closing := []byte(`]}`)
	return func(seq uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(path)
		req.Header.SetContentType("application/json")
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
		req.AppendBody(open)
		base := seq * uint64(size)
		for j := 0; j < size; j++ {
			if j > 0 {
				req.AppendBody(comma)
			}
			tmpl.AppendBody(req, base+uint64(j))
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
