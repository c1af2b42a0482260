package http

import (
	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/analytics"
)

// Admin CRUD of goals and funnels (contract sections 3 and 10).

func (s *Server) adminCreateGoal(ctx *fasthttp.RequestCtx) {
	var in analytics.GoalSpec
	if !decodeAdmin(ctx, &in) {
		return
	}
	g, err := s.eng.CreateGoal(param(ctx, "id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, g)
}

func (s *Server) adminListGoals(ctx *fasthttp.RequestCtx) {
	gs, err := s.eng.ListGoals(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": gs})
}

func (s *Server) adminGetGoal(ctx *fasthttp.RequestCtx) {
	g, err := s.eng.GetGoal(param(ctx, "id"), param(ctx, "goal_id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Goal")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, g)
}

func (s *Server) adminPutGoal(ctx *fasthttp.RequestCtx) {
	var in analytics.GoalSpec
	if !decodeAdmin(ctx, &in) {
		return
	}
	g, err := s.eng.UpdateGoal(param(ctx, "id"), param(ctx, "goal_id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Goal")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, g)
}

func (s *Server) adminDeleteGoal(ctx *fasthttp.RequestCtx) {
	if err := s.eng.DeleteGoal(param(ctx, "id"), param(ctx, "goal_id")); err != nil {
		s.writeAdminError(ctx, err, "Goal")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

func (s *Server) adminCreateFunnel(ctx *fasthttp.RequestCtx) {
	var in analytics.FunnelSpec
	if !decodeAdmin(ctx, &in) {
		return
	}
	f, err := s.eng.CreateFunnel(param(ctx, "id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, f)
}

func (s *Server) adminListFunnels(ctx *fasthttp.RequestCtx) {
	fs, err := s.eng.ListFunnels(param(ctx, "id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": fs})
}

func (s *Server) adminGetFunnel(ctx *fasthttp.RequestCtx) {
	f, err := s.eng.GetFunnel(param(ctx, "id"), param(ctx, "funnel_id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Funnel")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, f)
}

func (s *Server) adminPutFunnel(ctx *fasthttp.RequestCtx) {
	var in analytics.FunnelSpec
	if !decodeAdmin(ctx, &in) {
		return
	}
	f, err := s.eng.UpdateFunnel(param(ctx, "id"), param(ctx, "funnel_id"), in)
	if err != nil {
		s.writeAdminError(ctx, err, "Funnel")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, f)
}

func (s *Server) adminDeleteFunnel(ctx *fasthttp.RequestCtx) {
	if err := s.eng.DeleteFunnel(param(ctx, "id"), param(ctx, "funnel_id")); err != nil {
		s.writeAdminError(ctx, err, "Funnel")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
