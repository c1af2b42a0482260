package http

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
)

// Profiles (contract section 12): GET /profiles/{id} on the public listener
// (secret keys) and the admin list and read. The id is the rest of the path
// as the client sent it, percent-decoded once, so ids holding '/' or '%'
// are read exactly (the router would see them decoded and normalized).

const msgProfileMissing = "Profile not found"

// pathTail is the percent-decoded part of the request's raw path after its
// first n segments ("/a/b/c" with n = 1 gives "b/c"); ok is false when it
// does not decode.
func pathTail(ctx *fasthttp.RequestCtx, n int) (string, bool) {
	raw := string(ctx.Request.URI().PathOriginal())
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i]
	}
	parts := strings.SplitN(raw, "/", n+2) // "", then n segments, then the tail
	if len(parts) < n+2 {
		return "", false
	}
	s, err := url.PathUnescape(parts[n+1])
	return s, err == nil
}

func (s *Server) handleProfile(ctx *fasthttp.RequestCtx) {
	p := s.startRead(ctx)
	if p == nil {
		return
	}
	id, ok := pathTail(ctx, 1) // /profiles/{id}
	if !ok {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, msgProfileMissing))
		return
	}
	prof, err := s.eng.Profile(p, id)
	if errors.Is(err, engine.ErrNotFound) {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, msgProfileMissing))
		return
	}
	if err != nil {
		s.writeEngineError(ctx, err)
		return
	}
	writeRaw(ctx, fasthttp.StatusOK, prof.AppendJSON(make([]byte, 0, 256+len(prof.Traits))))
}

// adminListProfiles pages a project environment's profiles by id.
func (s *Server) adminListProfiles(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	limit := 50
	if v := args.Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil {
			n = -1 // reported as out of range
		}
		limit = n
	}
	page, err := s.eng.ListProfiles(param(ctx, "id"), string(args.Peek("environment")), string(args.Peek("after")), limit)
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

// adminGetProfile reads one person of a project environment.
func (s *Server) adminGetProfile(ctx *fasthttp.RequestCtx) {
	projectID := param(ctx, "id")
	if _, err := s.eng.GetProject(projectID); err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	id, ok := pathTail(ctx, 5) // /admin/v1/projects/{id}/profiles/{profile_id}
	if !ok {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, msgProfileMissing))
		return
	}
	prof, err := s.eng.GetProfile(projectID, string(ctx.QueryArgs().Peek("environment")), id)
	if err != nil {
		s.writeAdminError(ctx, err, "Profile")
		return
	}
	writeRaw(ctx, fasthttp.StatusOK, prof.AppendJSON(make([]byte, 0, 256+len(prof.Traits))))
}
