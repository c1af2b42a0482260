package http

import (
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
)

// Admin handlers of webhooks (/admin/v1/projects/{id}/webhooks) and usage
// alerts (/admin/v1/projects/{id}/alerts). The routes are in adminRoutes.

func (s *Server) adminCreateWebhook(ctx *fasthttp.RequestCtx) {
	var in engine.WebhookInput
	if !decodeAdmin(ctx, &in) {
		return
	}
	w, err := s.eng.CreateWebhook(param(ctx, "id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeSecretJSON(ctx, fasthttp.StatusCreated, w)
}

func (s *Server) adminListWebhooks(ctx *fasthttp.RequestCtx) {
	ws, err := s.eng.Webhooks(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": ws})
}

func (s *Server) adminGetWebhook(ctx *fasthttp.RequestCtx) {
	w, err := s.eng.GetWebhook(param(ctx, "id"), param(ctx, "webhook_id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Webhook")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, w)
}

// adminUpdateWebhook serves PUT; fields left out stay as they are.
func (s *Server) adminUpdateWebhook(ctx *fasthttp.RequestCtx) {
	var in engine.WebhookInput
	if !decodeAdmin(ctx, &in) {
		return
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(ctx.Request.Body(), &raw)
	if v, ok := raw["event_names"]; ok && string(v) == "null" {
		empty := []string{}
		in.EventNames = &empty // null: every event name again
	}
	w, err := s.eng.UpdateWebhook(param(ctx, "id"), param(ctx, "webhook_id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Webhook")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, w)
}

func (s *Server) adminDeleteWebhook(ctx *fasthttp.RequestCtx) {
	if err := s.eng.DeleteWebhook(param(ctx, "id"), param(ctx, "webhook_id")); err != nil {
		s.writeAdminError(ctx, err, "Webhook")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

func (s *Server) adminRotateWebhookSecret(ctx *fasthttp.RequestCtx) {
	r, err := s.eng.RotateWebhookSecret(param(ctx, "id"), param(ctx, "webhook_id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Webhook")
		return
	}
	writeSecretJSON(ctx, fasthttp.StatusOK, r)
}

// adminTestWebhook answers 200 with the attempt when it finished in time,
// 202 with the queued delivery otherwise; the log has the outcome either way.
func (s *Server) adminTestWebhook(ctx *fasthttp.RequestCtx) {
	d, finished, err := s.eng.TestWebhook(param(ctx, "id"), param(ctx, "webhook_id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Webhook")
		return
	}
	status := fasthttp.StatusOK
	if !finished {
		status = fasthttp.StatusAccepted
	}
	writeJSON(ctx, status, d)
}

func (s *Server) adminListDeliveries(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	intArg := func(name string, def int) int {
		v := args.Peek(name)
		if v == nil {
			return def
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return -1 // reported as out of range
		}
		return n
	}
	page, err := s.eng.Deliveries(param(ctx, "id"), param(ctx, "webhook_id"), intArg("limit", 50), intArg("offset", 0),
		string(args.Peek("status")))
	if err != nil {
		s.writeAdminError(ctx, err, "Webhook")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

func (s *Server) adminReplayDelivery(ctx *fasthttp.RequestCtx) {
	d, err := s.eng.ReplayDelivery(param(ctx, "id"), param(ctx, "webhook_id"), param(ctx, "delivery_id"))
	if err != nil {
		if err == engine.ErrConflict {
			writeError(ctx, newError(fasthttp.StatusConflict, "conflict", "The delivery is being attempted right now; replay it once the attempt is logged"))
			return
		}
		s.writeAdminError(ctx, err, "Delivery")
		return
	}
	writeJSON(ctx, fasthttp.StatusAccepted, d)
}

func decodeAlert(ctx *fasthttp.RequestCtx) (engine.AlertInput, bool) {
	var in engine.AlertInput
	if !decodeAdmin(ctx, &in) {
		return in, false
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(ctx.Request.Body(), &raw)
	if v, ok := raw["key_id"]; ok && string(v) == "null" {
		in.ClearKey = true
	}
	return in, true
}

func (s *Server) adminCreateAlert(ctx *fasthttp.RequestCtx) {
	in, ok := decodeAlert(ctx)
	if !ok {
		return
	}
	a, err := s.eng.CreateAlert(param(ctx, "id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, a)
}

func (s *Server) adminListAlerts(ctx *fasthttp.RequestCtx) {
	as, err := s.eng.Alerts(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": as})
}

func (s *Server) adminGetAlert(ctx *fasthttp.RequestCtx) {
	a, err := s.eng.GetAlert(param(ctx, "id"), param(ctx, "alert_id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Alert")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, a)
}

// adminUpdateAlert serves PUT; fields left out stay as they are, "key_id": null widens the alert to every key.
func (s *Server) adminUpdateAlert(ctx *fasthttp.RequestCtx) {
	in, ok := decodeAlert(ctx)
	if !ok {
		return
	}
	a, err := s.eng.UpdateAlert(param(ctx, "id"), param(ctx, "alert_id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Alert")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, a)
}

func (s *Server) adminDeleteAlert(ctx *fasthttp.RequestCtx) {
	if err := s.eng.DeleteAlert(param(ctx, "id"), param(ctx, "alert_id")); err != nil {
		s.writeAdminError(ctx, err, "Alert")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
