package http

import (
	"github.com/valyala/fasthttp"
)

// Admin API of the durable tail's named cursors (contract section 14).

func (s *Server) adminListCursors(ctx *fasthttp.RequestCtx) {
	cs, err := s.eng.ListCursors(param(ctx, "id"), string(ctx.QueryArgs().Peek("environment")))
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"data": cs})
}

func (s *Server) adminDeleteCursor(ctx *fasthttp.RequestCtx) {
	if err := s.eng.DeleteCursor(param(ctx, "id"), string(ctx.QueryArgs().Peek("environment")), param(ctx, "name")); err != nil {
		s.writeAdminError(ctx, err, "Cursor")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// cursorReset is the body of POST .../cursors/{name}/reset.
type cursorReset struct {
	To string `json:"to"`
}

func (s *Server) adminResetCursor(ctx *fasthttp.RequestCtx) {
	var in cursorReset
	if !decodeAdmin(ctx, &in) {
		return
	}
	c, err := s.eng.ResetCursor(param(ctx, "id"), string(ctx.QueryArgs().Peek("environment")), param(ctx, "name"), in.To)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, c)
}
