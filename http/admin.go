package http

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"time"

	"github.com/fasthttp/router"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/pprofhandler"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ratelimit"
)

func (s *Server) adminRoutes() *router.Router {
	r := s.newRouter("Not found")
	a := func(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
		// Import streams its body (unbounded, by design); every other admin
		// route reads at most maxReadBody bytes, once authenticated.
		return s.route(name, s.adminAuth(h, name != "admin_import"))
	}
	r.GET("/healthz", s.route("admin_healthz", s.handleHealth))
	r.GET("/metrics", s.route("metrics", s.handleMetrics))
	// Profiles for operators and the bench suite; behind the admin token.
	r.GET("/debug/pprof/{profile:*}", a("pprof", pprofhandler.PprofHandler))
	r.POST("/admin/v1/projects", a("admin_create_project", s.adminCreateProject))
	r.GET("/admin/v1/projects", a("admin_list_projects", s.adminListProjects))
	r.GET("/admin/v1/projects/{id}", a("admin_get_project", s.adminGetProject))
	r.PATCH("/admin/v1/projects/{id}", a("admin_update_project", s.adminUpdateProject))
	r.DELETE("/admin/v1/projects/{id}", a("admin_delete_project", s.adminDeleteProject))
	r.POST("/admin/v1/projects/{id}/keys", a("admin_create_key", s.adminCreateKey))
	r.GET("/admin/v1/projects/{id}/keys", a("admin_list_keys", s.adminListKeys))
	r.DELETE("/admin/v1/keys/{key_id}", a("admin_revoke_key", s.adminRevokeKey))
	r.GET("/admin/v1/projects/{id}/usage", a("admin_usage", s.adminUsage))
	r.POST("/admin/v1/projects/{id}/import", a("admin_import", s.adminImport))
	r.GET("/admin/v1/projects/{id}/export", a("admin_export", s.adminExport))
	r.POST("/admin/v1/backup", a("admin_backup", s.adminBackup))
	r.DELETE("/admin/v1/projects/{id}/visitors/{visitor_id}", a("admin_erase_visitor", s.adminEraseVisitor))
	r.GET("/admin/v1/projects/{id}/profiles", a("admin_list_profiles", s.adminListProfiles))
	r.GET("/admin/v1/projects/{id}/profiles/{profile_id:*}", a("admin_get_profile", s.adminGetProfile))
	r.GET("/admin/v1/jobs/{job_id}", a("admin_get_job", s.adminGetJob))
	r.POST("/admin/v1/projects/{id}/event-definitions", a("admin_create_definition", s.adminCreateDefinition))
	r.GET("/admin/v1/projects/{id}/event-definitions", a("admin_list_definitions", s.adminListDefinitions))
	r.GET("/admin/v1/projects/{id}/event-definitions/{name}", a("admin_get_definition", s.adminGetDefinition))
	r.PUT("/admin/v1/projects/{id}/event-definitions/{name}", a("admin_put_definition", s.adminPutDefinition))
	r.DELETE("/admin/v1/projects/{id}/event-definitions/{name}", a("admin_delete_definition", s.adminDeleteDefinition))
	r.POST("/admin/v1/projects/{id}/goals", a("admin_create_goal", s.adminCreateGoal))
	r.GET("/admin/v1/projects/{id}/goals", a("admin_list_goals", s.adminListGoals))
	r.GET("/admin/v1/projects/{id}/goals/{goal_id}", a("admin_get_goal", s.adminGetGoal))
	r.PUT("/admin/v1/projects/{id}/goals/{goal_id}", a("admin_put_goal", s.adminPutGoal))
	r.DELETE("/admin/v1/projects/{id}/goals/{goal_id}", a("admin_delete_goal", s.adminDeleteGoal))
	r.POST("/admin/v1/projects/{id}/funnels", a("admin_create_funnel", s.adminCreateFunnel))
	r.GET("/admin/v1/projects/{id}/funnels", a("admin_list_funnels", s.adminListFunnels))
	r.GET("/admin/v1/projects/{id}/funnels/{funnel_id}", a("admin_get_funnel", s.adminGetFunnel))
	r.PUT("/admin/v1/projects/{id}/funnels/{funnel_id}", a("admin_put_funnel", s.adminPutFunnel))
	r.DELETE("/admin/v1/projects/{id}/funnels/{funnel_id}", a("admin_delete_funnel", s.adminDeleteFunnel))
	r.POST("/admin/v1/projects/{id}/webhooks", a("admin_create_webhook", s.adminCreateWebhook))
	r.GET("/admin/v1/projects/{id}/webhooks", a("admin_list_webhooks", s.adminListWebhooks))
	r.GET("/admin/v1/projects/{id}/webhooks/{webhook_id}", a("admin_get_webhook", s.adminGetWebhook))
	r.PUT("/admin/v1/projects/{id}/webhooks/{webhook_id}", a("admin_put_webhook", s.adminUpdateWebhook))
	r.DELETE("/admin/v1/projects/{id}/webhooks/{webhook_id}", a("admin_delete_webhook", s.adminDeleteWebhook))
	r.POST("/admin/v1/projects/{id}/webhooks/{webhook_id}/rotate-secret", a("admin_rotate_webhook_secret", s.adminRotateWebhookSecret))
	r.POST("/admin/v1/projects/{id}/webhooks/{webhook_id}/test", a("admin_test_webhook", s.adminTestWebhook))
	r.GET("/admin/v1/projects/{id}/webhooks/{webhook_id}/deliveries", a("admin_list_deliveries", s.adminListDeliveries))
	r.POST("/admin/v1/projects/{id}/webhooks/{webhook_id}/deliveries/{delivery_id}/replay", a("admin_replay_delivery", s.adminReplayDelivery))
	r.POST("/admin/v1/projects/{id}/alerts", a("admin_create_alert", s.adminCreateAlert))
	r.GET("/admin/v1/projects/{id}/alerts", a("admin_list_alerts", s.adminListAlerts))
	r.GET("/admin/v1/projects/{id}/alerts/{alert_id}", a("admin_get_alert", s.adminGetAlert))
	r.PUT("/admin/v1/projects/{id}/alerts/{alert_id}", a("admin_put_alert", s.adminUpdateAlert))
	r.DELETE("/admin/v1/projects/{id}/alerts/{alert_id}", a("admin_delete_alert", s.adminDeleteAlert))
	r.GET("/admin/v1/projects/{id}/cursors", a("admin_list_cursors", s.adminListCursors))
	r.DELETE("/admin/v1/projects/{id}/cursors/{name}", a("admin_delete_cursor", s.adminDeleteCursor))
	r.POST("/admin/v1/projects/{id}/cursors/{name}/reset", a("admin_reset_cursor", s.adminResetCursor))
	// The web dashboard: pages, login/logout/session, and its analytics and live-feed reads (dashboard.go).
	s.dashboardRoutes(r, a)
	return r
}

// adminAuth checks the admin bearer token in constant time. A request
// without an Authorization header may instead carry a dashboard session
// cookie; it then also has to pass the same-origin and CSRF checks
// (sessionAuth in session.go).
func (s *Server) adminAuth(handler fasthttp.RequestHandler, buffer bool) fasthttp.RequestHandler {
	h := handler
	if buffer {
		h = func(ctx *fasthttp.RequestCtx) {
			if fail := bufferBody(ctx, maxReadBody, maxReadBody, s.adminBodies); fail != nil {
				writeError(ctx, fail)
				return
			}
			handler(ctx)
		}
	}
	return func(ctx *fasthttp.RequestCtx) {
		tok := bearerToken(ctx)
		if tok == nil && len(ctx.Request.Header.Peek("Authorization")) == 0 && len(ctx.Request.Header.Cookie(cookieName(ctx))) > 0 {
			if fail := s.sessionAuth(ctx); fail != nil {
				writeError(ctx, fail)
				return
			}
			h(ctx)
			return
		}
		if d := s.authLocked(ctx); d > 0 {
			s.writeAuthThrottled(ctx, d, nil)
			return
		}
		if len(s.adminToken) == 0 || subtle.ConstantTimeCompare(tok, s.adminToken) != 1 {
			s.refuseAdminToken(ctx) // 401, or 429 when this failure starts a lockout
			return
		}
		s.authSucceeded(ctx)
		h(ctx)
	}
}

// decodeAdmin parses a JSON admin body into v; it answers 400 itself on failure.
func decodeAdmin(ctx *fasthttp.RequestCtx, v any) bool {
	if err := json.Unmarshal(ctx.Request.Body(), v); err != nil {
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest,
			message: "Request body must be a JSON object of the documented shape",
			details: map[string]string{"body": "invalid JSON or wrong field types"}})
		return false
	}
	return true
}

// writeAdminError maps engine errors of admin calls.
func (s *Server) writeAdminError(ctx *fasthttp.RequestCtx, err error, what string) {
	var ie *engine.InputError
	switch {
	case errors.As(err, &ie):
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid request data", details: ie.Details})
	case errors.Is(err, engine.ErrNotFound):
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, what+" not found"))
	case errors.Is(err, engine.ErrConflict):
		writeError(ctx, newError(fasthttp.StatusConflict, "conflict", what+" already exists"))
	default:
		s.writeEngineError(ctx, err)
	}
}

func param(ctx *fasthttp.RequestCtx, name string) string {
	v, _ := ctx.UserValue(name).(string)
	return v
}

func (s *Server) adminCreateProject(ctx *fasthttp.RequestCtx) {
	var in engine.ProjectInput
	if !decodeAdmin(ctx, &in) {
		return
	}
	p, err := s.eng.CreateProject(in)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, p)
}

func (s *Server) adminListProjects(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": s.eng.Projects()})
}

func (s *Server) adminGetProject(ctx *fasthttp.RequestCtx) {
	p, err := s.eng.GetProject(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, p)
}

func (s *Server) adminUpdateProject(ctx *fasthttp.RequestCtx) {
	var in engine.ProjectInput
	if !decodeAdmin(ctx, &in) {
		return
	}
	// "limits": null clears custom limits; an absent field leaves them.
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(ctx.Request.Body(), &raw)
	if v, ok := raw["limits"]; ok && string(v) == "null" {
		in.ClearLimits = true
	}
	p, err := s.eng.UpdateProject(param(ctx, "id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, p)
}

func (s *Server) adminDeleteProject(ctx *fasthttp.RequestCtx) {
	if err := s.eng.DeleteProject(param(ctx, "id")); err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

func (s *Server) adminCreateKey(ctx *fasthttp.RequestCtx) {
	var in engine.KeyInput
	if !decodeAdmin(ctx, &in) {
		return
	}
	k, err := s.eng.CreateKey(param(ctx, "id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeSecretJSON(ctx, fasthttp.StatusCreated, k)
}

func (s *Server) adminListKeys(ctx *fasthttp.RequestCtx) {
	keys, err := s.eng.Keys(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": keys})
}

func (s *Server) adminRevokeKey(ctx *fasthttp.RequestCtx) {
	if err := s.eng.RevokeKey(param(ctx, "key_id")); err != nil {
		s.writeAdminError(ctx, err, "Key")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// usageWindow is one window of a key's usage.
type usageWindow struct {
	Limit     int64 `json:"limit"`
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	Reset     int64 `json:"reset"`
}

func (s *Server) adminUsage(ctx *fasthttp.RequestCtx) {
	keys, err := s.eng.Keys(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	out := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		if k.RevokedAt != nil {
			continue
		}
		p := s.eng.PrincipalByID(k.ID)
		if p == nil {
			continue
		}
		rep, err := s.eng.Submit(p, ratelimit.None, nil, true)
		if err != nil {
			s.writeEngineError(ctx, err)
			return
		}
		buckets := map[string]map[string]usageWindow{}
		for kind, ws := range rep.Buckets {
			m := map[string]usageWindow{}
			for _, w := range ws {
				m[w.Name] = usageWindow{Limit: w.Limit, Used: w.Limit - w.Remaining, Remaining: w.Remaining, Reset: w.Reset}
			}
			buckets[ratelimit.Kind(kind).String()] = m
		}
		s.eng.Release(rep)
		out = append(out, map[string]any{"key_id": k.ID, "name": k.Name, "type": k.Type,
			"environment": k.Environment, "last_used_at": k.LastUsedAt, "buckets": buckets})
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": out, "at": time.Now().Unix()})
}

func (s *Server) adminCreateDefinition(ctx *fasthttp.RequestCtx) {
	var d event.Definition
	if !decodeAdmin(ctx, &d) {
		return
	}
	out, err := s.eng.PutDefinition(param(ctx, "id"), d, true)
	if err != nil {
		s.writeAdminError(ctx, err, "Event definition")
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, out)
}

func (s *Server) adminListDefinitions(ctx *fasthttp.RequestCtx) {
	defs, err := s.eng.Definitions(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": defs})
}

func (s *Server) adminGetDefinition(ctx *fasthttp.RequestCtx) {
	d, err := s.eng.Definition(param(ctx, "id"), param(ctx, "name"))
	if err != nil {
		s.writeAdminError(ctx, err, "Event definition")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, d)
}

func (s *Server) adminPutDefinition(ctx *fasthttp.RequestCtx) {
	var d event.Definition
	if !decodeAdmin(ctx, &d) {
		return
	}
	name := param(ctx, "name")
	if d.Name == "" {
		d.Name = name
	}
	if d.Name != name {
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid request data",
			details: map[string]string{"name": "must match the name in the path"}})
		return
	}
	out, err := s.eng.PutDefinition(param(ctx, "id"), d, false)
	if err != nil {
		s.writeAdminError(ctx, err, "Event definition")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (s *Server) adminDeleteDefinition(ctx *fasthttp.RequestCtx) {
	if err := s.eng.DeleteDefinition(param(ctx, "id"), param(ctx, "name")); err != nil {
		s.writeAdminError(ctx, err, "Event definition")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
