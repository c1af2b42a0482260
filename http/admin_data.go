package http

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/eventjson"
	"github.com/eventd/eventd/storage"
)

// adminImport streams an NDJSON (optionally gzip) body into the project's dataset.
func (s *Server) adminImport(ctx *fasthttp.RequestCtx) {
	var body io.Reader = ctx.RequestBodyStream()
	if body == nil {
		body = bytes.NewReader(ctx.Request.Body())
	}
	br := bufio.NewReaderSize(body, 64<<10)
	// gzip by header or by its magic bytes, so `curl --data-binary @events.ndjson.gz` works too.
	magic, _ := br.Peek(2)
	if string(ctx.Request.Header.ContentEncoding()) == "gzip" || bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest,
				message: "Request body is not valid gzip", details: map[string]string{"body": "invalid gzip data"}})
			return
		}
		defer zr.Close()
		body = zr
	} else {
		body = br
	}
	env := string(ctx.QueryArgs().Peek("environment"))
	res, err := s.eng.Import(param(ctx, "id"), env, body, nil)
	if err != nil && res.Lines == 0 {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	if errors.Is(err, engine.ErrInsufficientStorage) {
		// Space ran short mid-way: what was committed stays; say how much.
		ctx.Response.Header.Set("Retry-After", retryAfterDisk)
		writeJSON(ctx, fasthttp.StatusInsufficientStorage, map[string]any{"error": codeInsufficientStorage,
			"message": msgInsufficientStorage, "result": res})
		return
	}
	if err != nil {
		// A broken stream mid-way: what was committed stays; say so.
		s.log.Error("import interrupted", "err", err, "lines", res.Lines)
		writeJSON(ctx, fasthttp.StatusBadRequest, map[string]any{"error": codeBadRequest,
			"message": "The import stopped early: " + err.Error(), "result": res})
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, res)
}

// adminExport streams the events of a range as NDJSON, oldest first.
func (s *Server) adminExport(ctx *fasthttp.RequestCtx) {
	q, fail := parseListQuery(ctx.QueryArgs(), "environment")
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	projectID := param(ctx, "id")
	env := string(ctx.QueryArgs().Peek("environment"))
	if _, err := s.eng.GetProject(projectID); err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	if env != "" && env != "live" && env != "test" {
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters",
			details: map[string]string{"environment": "must be live or test"}})
		return
	}
	from, to := q.From, q.To
	if to == math.MaxInt64 {
		to = math.MaxInt64 - 1
	}
	ctx.SetContentType("application/x-ndjson")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		line := make([]byte, 0, 512)
		err := s.eng.Export(projectID, env, from, to, func(e *storage.Event) bool {
			line = eventjson.Append(line[:0], e, true)
			line = append(line, '\n')
			_, err := w.Write(line)
			return err == nil
		})
		if err != nil {
			s.log.Error("export failed", "project", projectID, "err", err)
		}
	})
}

// backupRequest is the body of POST /admin/v1/backup.
type backupRequest struct {
	Dir string `json:"dir"`
}

// adminBackup takes a consistent online snapshot (a Pebble checkpoint).
func (s *Server) adminBackup(ctx *fasthttp.RequestCtx) {
	var in backupRequest
	if !decodeAdmin(ctx, &in) {
		return
	}
	if err := s.eng.Backup(in.Dir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			writeError(ctx, &apiError{status: fasthttp.StatusConflict, code: "conflict", message: "The backup directory already holds a backup",
				details: map[string]string{"dir": "must not exist yet"}})
			return
		}
		s.writeAdminError(ctx, err, "Backup")
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, map[string]any{"dir": in.Dir, "created_at": string(event.AppendTime(nil, time.Now().UnixMilli()))})
}

// adminEraseVisitor starts a GDPR erasure job: 202 with the job and its Location.
func (s *Server) adminEraseVisitor(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	suppress := string(args.Peek("suppress"))
	if suppress != "" && suppress != "true" && suppress != "false" {
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters",
			details: map[string]string{"suppress": "must be true or false"}})
		return
	}
	job, err := s.eng.EraseVisitor(param(ctx, "id"), string(args.Peek("environment")), param(ctx, "visitor_id"), suppress == "true")
	if err != nil {
		s.writeAdminError(ctx, err, "Project")
		return
	}
	ctx.Response.Header.Set("Location", "/admin/v1/jobs/"+job.ID)
	writeJSON(ctx, fasthttp.StatusAccepted, job)
}

// adminGetJob reports a background job's progress.
func (s *Server) adminGetJob(ctx *fasthttp.RequestCtx) {
	job, err := s.eng.GetJob(param(ctx, "job_id"))
	if err != nil {
		s.writeAdminError(ctx, err, "Job")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, job)
}
