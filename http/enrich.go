package http

import (
	"net/netip"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/enrich"
)

// Enrichment at ingest (contract section 13, docs/analytics.md): which
// events get the properties engine/enrich computes, and from what.
//
//   - Every event sent with a public key: the key lives in a browser page
//     (t.js, analytics.js), so the request's User-Agent and address are the
//     visitor's.
//   - A pageview (native, or a Segment page message) sent with a secret
//     key: the sender is a server, so its own User-Agent and address say
//     nothing of the visitor and are not used; a Segment message's
//     context.userAgent and context.ip are (any key), and the referrer and
//     UTM fields come from the event's url and referrer.
//   - Any other secret-key event is left as sent, at the cost of one branch.
//
// It runs in the request goroutine after the event was validated and
// before it is handed to the engine; the address is used for the country
// and forgotten. Bots are flagged ($bot: true), never refused.

// enrichCtx holds what a request tells about the visitor, read once per
// request for all the events of a batch.
type enrichCtx struct {
	read bool
	req  enrich.Request
}

// enrichEvent rewrites pe's properties with the enrichment when the rule
// above says so.
func (s *Server) enrichEvent(ctx *fasthttp.RequestCtx, p *engine.Principal, pe *actors.Pending, ec *enrichCtx) {
	if s.enricher == nil {
		return
	}
	public := p.Type() == engine.Public
	if !public && pe.Event.Name != "pageview" {
		return
	}
	if !ec.read {
		ec.read = true
		if public {
			ec.req.UserAgent = string(ctx.Request.Header.UserAgent())
			ec.req.IP, _ = netip.AddrFromSlice(ctx.RemoteIP())
			ec.req.IP = ec.req.IP.Unmap()
		}
	}
	pe.Event.Properties = s.enricher.Enrich(pe.Event.Properties, ec.req)
	pe.Event.Numbers = nil // an index of the properties as sent
}
