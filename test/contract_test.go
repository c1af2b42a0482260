package test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/parameters"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/responses"
	"github.com/pb33f/libopenapi/datamodel"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	lowv3 "github.com/pb33f/libopenapi/datamodel/low/v3"
)

// specFile is the contract every response of the suite is checked against.
const specFile = "../docs/openapi.yaml"

// contract is docs/openapi.yaml loaded once for the package: building the
// model and compiling its schemas takes seconds, every request reuses them.
var contract struct {
	once  sync.Once
	err   error
	mu    sync.Mutex // libopenapi renders a schema in place on its first use; parallel tests checking the same schema raced
	model *v3.Document
	v     validator.Validator
	opts  *config.ValidationOptions
}

func loadContract() error {
	contract.once.Do(func() {
		spec, err := os.ReadFile(specFile)
		if err != nil {
			contract.err = err
			return
		}
		cfg := datamodel.NewDocumentConfiguration()
		cfg.Logger = slog.New(slog.DiscardHandler) // the docs package's tests report the document's own problems
		doc, err := libopenapi.NewDocumentWithConfiguration(spec, cfg)
		if err != nil {
			contract.err = fmt.Errorf("parse %s: %w", specFile, err)
			return
		}
		m, err := doc.BuildV3Model()
		if err != nil {
			contract.err = fmt.Errorf("build %s: %w", specFile, err)
			return
		}
		contract.model = &m.Model
		contract.opts = config.NewValidationOptions(config.WithFormatAssertions())
		contract.v = validator.NewValidatorFromV3Model(contract.model, config.WithExistingOpts(contract.opts))
	})
	return contract.err
}

// listenerIsAdmin maps the host:port of every listener the suite started to
// whether it is an admin listener, so a check knows which listener a request
// went to: the document gives each operation a server (public or admin), and
// a public route asked of the admin listener (or the reverse) is an unknown
// path there. A later server may get a port an earlier one used, so every
// start records both of its listeners again.
var listenerIsAdmin sync.Map

// checkContract fails the test when the response to req does not match
// docs/openapi.yaml: its status must be documented for the path and method
// (or be one of the answers the document gives for any route), and its
// headers and body must match that response's headers and schema.
func checkContract(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if err := loadContract(); err != nil {
		t.Fatalf("contract: %v", err)
	}
	if errs := contractErrors(req, status, header, body); len(errs) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "response does not match %s: %s %s answered %d\n", specFile, req.Method, req.URL.RequestURI(), status)
		for _, e := range errs {
			b.WriteString("  - " + e + "\n")
		}
		excerpt := body
		if len(excerpt) > 2000 {
			excerpt = excerpt[:2000]
		}
		fmt.Fprintf(&b, "  body: %s", excerpt)
		t.Fatal(b.String())
	}
}

// contractErrors is checkContract's verdict, one line per problem.
func contractErrors(req *http.Request, status int, header http.Header, body []byte) []string {
	contract.mu.Lock()
	defer contract.mu.Unlock()
	resp := &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)), Request: req}
	item, perrs, specPath := paths.FindPath(req, contract.model, contract.opts)
	var op *v3.Operation
	if item != nil && len(perrs) == 0 {
		op = helpers.ExtractOperation(req, item)
	}
	if op != nil && !onListener(req, op, item) {
		op = nil // a route of the other listener: unknown here
		item = nil
	}
	switch {
	case item == nil || op == nil && status == http.StatusNotFound:
		// Not a route of this listener: the document's NotFound answer.
		return globalResponse(req, resp, "NotFound", http.StatusNotFound)
	case op == nil:
		// A documented path with an undocumented method: 405 with Allow.
		return globalResponse(req, resp, "MethodNotAllowed", http.StatusMethodNotAllowed)
	}
	if _, documented := op.Responses.Codes.Get(strconv.Itoa(status)); !documented {
		switch status {
		case http.StatusRequestHeaderFieldsTooLarge:
			// Refused before routing on every route (info.description, Errors).
			return globalResponse(req, resp, "HeadersTooLarge", status)
		}
	}
	var out []string
	if ok, errs := contract.v.GetResponseBodyValidator().ValidateResponseBodyWithPathItem(req, resp, item, specPath); !ok {
		out = append(out, describe(errs)...)
	}
	if r, ok := op.Responses.Codes.Get(strconv.Itoa(status)); ok {
		out = append(out, optionalHeaders(req, header, r)...)
	}
	return out
}

// onListener reports whether the operation is served by the listener the
// request went to, judged by the port of the operation's server
// (8080 public, 8081 admin in the document).
func onListener(req *http.Request, op *v3.Operation, item *v3.PathItem) bool {
	servers := op.Servers
	if len(servers) == 0 {
		servers = item.Servers
	}
	if len(servers) == 0 {
		servers = contract.model.Servers
	}
	if len(servers) == 0 {
		return true
	}
	v, _ := listenerIsAdmin.Load(req.URL.Host)
	isAdmin, _ := v.(bool)
	for _, s := range servers {
		if strings.HasSuffix(s.URL, ":8081") == isAdmin {
			return true
		}
	}
	return false
}

// globalResponse checks an answer the document gives for any route (an
// unknown path, a wrong method, oversized headers) against the named
// component response.
func globalResponse(req *http.Request, resp *http.Response, name string, want int) []string {
	if resp.StatusCode != want {
		return []string{fmt.Sprintf("%s %s is not a documented route of this listener, so the answer must be %d (components.responses.%s)",
			req.Method, req.URL.Path, want, name)}
	}
	r, ok := contract.model.Components.Responses.Get(name)
	if !ok {
		return []string{fmt.Sprintf("components.responses.%s is missing from %s", name, specFile)}
	}
	var out []string
	mt, _, _ := helpers.ExtractContentType(resp.Header.Get("Content-Type"))
	media, ok := r.Content.Get(mt)
	switch {
	case !ok && r.Content.Len() > 0:
		out = append(out, fmt.Sprintf("Content-Type %q is not documented for components.responses.%s", mt, name))
	case ok && media.Schema != nil:
		if valid, errs := responses.ValidateResponseSchema(&responses.ValidateResponseSchemaInput{
			Request: req, Response: resp, Schema: media.Schema.Schema(), Version: 3.1,
			Options: []config.Option{config.WithExistingOpts(contract.opts)},
		}); !valid {
			out = append(out, describe(errs)...)
		}
	}
	if r.Headers != nil {
		if valid, errs := responses.ValidateResponseHeaders(req, resp, r.Headers, req.URL.Path, strconv.Itoa(want), config.WithExistingOpts(contract.opts)); !valid {
			out = append(out, describe(errs)...)
		}
	}
	return append(out, optionalHeaders(req, resp.Header, r)...)
}

// optionalHeaders checks documented headers that are present but not
// required: the validator checks the schema of required ones only, and a
// wrong optional header (a Retry-After that is not an integer) misleads a
// client as much.
func optionalHeaders(req *http.Request, header http.Header, r *v3.Response) []string {
	var out []string
	for name, h := range r.Headers.FromOldest() {
		if h.Required || h.Schema == nil {
			continue
		}
		for _, value := range header.Values(name) {
			errs := parameters.ValidateParameterSchema(h.Schema.Schema(), nil, value, "header",
				"response header", name, helpers.ResponseBodyValidation, lowv3.HeadersLabel, contract.opts)
			out = append(out, describe(errs)...)
		}
	}
	return out
}

// describe turns the validator's errors into one line each, with the field
// and the schema keyword that failed.
func describe(errs []*liberrors.ValidationError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %s", e.Message, e.Reason)
		if e.SpecLine > 0 {
			fmt.Fprintf(&b, " (openapi.yaml line %d)", e.SpecLine)
		}
		for _, s := range e.SchemaValidationErrors {
			loc := s.FieldPath
			if loc == "" {
				loc = "/" + strings.Join(s.InstancePath, "/")
			}
			fmt.Fprintf(&b, "\n      %s: %s (%s)", loc, s.Reason, s.KeywordLocation)
		}
		out = append(out, b.String())
	}
	return out
}
