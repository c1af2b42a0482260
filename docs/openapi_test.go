package docs

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"
	"go.yaml.in/yaml/v4"
)

const (
	specPath     = "openapi.yaml"
	publicURL    = "http://127.0.0.1:8080"
	adminURL     = "http://127.0.0.1:8081"
	requestIDRef = "#/components/headers/X-Request-Id"
)

// wantRoutes lists every route eventd serves. Path parameters are written {} because their
// names do not matter on the wire. A route missing from openapi.yaml, or a route documented
// there but missing here, fails TestOpenAPIOperations.
var wantRoutes = []string{
	// public API
	"POST /events",
	"GET /events",
	"OPTIONS /events",
	"POST /events/batch",
	"POST /v1/track",
	"POST /v1/page",
	"POST /v1/screen",
	"POST /v1/identify",
	"POST /v1/group",
	"POST /v1/alias",
	"POST /v1/batch",
	"POST /v1/import",
	"POST /v1/t",
	"POST /v1/p",
	"POST /v1/s",
	"POST /v1/i",
	"POST /v1/g",
	"POST /v1/a",
	"POST /v1/b",
	"POST /v1/m",
	"OPTIONS /events/batch",
	"GET /events/{}",
	"OPTIONS /events/{}",
	"GET /profiles/{}",
	"OPTIONS /profiles/{}",
	"GET /verify",
	"OPTIONS /verify",
	"GET /rate-limit",
	"OPTIONS /rate-limit",
	"GET /analytics",
	"OPTIONS /analytics",
	"GET /stream",
	"OPTIONS /stream",
	"POST /stream/cursors/{}/ack",
	"OPTIONS /stream/cursors/{}/ack",
	"GET /t.js",
	"OPTIONS /t.js",
	"GET /healthz", // on both listeners
	"HEAD /healthz",
	"OPTIONS /healthz",
	// admin API
	"POST /admin/v1/projects",
	"GET /admin/v1/projects",
	"GET /admin/v1/projects/{}",
	"PATCH /admin/v1/projects/{}",
	"DELETE /admin/v1/projects/{}",
	"POST /admin/v1/projects/{}/keys",
	"GET /admin/v1/projects/{}/keys",
	"DELETE /admin/v1/keys/{}",
	"POST /admin/v1/projects/{}/event-definitions",
	"GET /admin/v1/projects/{}/event-definitions",
	"GET /admin/v1/projects/{}/event-definitions/{}",
	"PUT /admin/v1/projects/{}/event-definitions/{}",
	"DELETE /admin/v1/projects/{}/event-definitions/{}",
	"POST /admin/v1/projects/{}/goals",
	"GET /admin/v1/projects/{}/goals",
	"GET /admin/v1/projects/{}/goals/{}",
	"PUT /admin/v1/projects/{}/goals/{}",
	"DELETE /admin/v1/projects/{}/goals/{}",
	"POST /admin/v1/projects/{}/funnels",
	"GET /admin/v1/projects/{}/funnels",
	"GET /admin/v1/projects/{}/funnels/{}",
	"PUT /admin/v1/projects/{}/funnels/{}",
	"DELETE /admin/v1/projects/{}/funnels/{}",
	"POST /admin/v1/projects/{}/webhooks",
	"GET /admin/v1/projects/{}/webhooks",
	"GET /admin/v1/projects/{}/webhooks/{}",
	"PUT /admin/v1/projects/{}/webhooks/{}",
	"DELETE /admin/v1/projects/{}/webhooks/{}",
	"GET /admin/v1/projects/{}/webhooks/{}/deliveries",
	"POST /admin/v1/projects/{}/webhooks/{}/deliveries/{}/replay",
	"POST /admin/v1/projects/{}/webhooks/{}/test",
	"POST /admin/v1/projects/{}/webhooks/{}/rotate-secret",
	"POST /admin/v1/projects/{}/alerts",
	"GET /admin/v1/projects/{}/alerts",
	"GET /admin/v1/projects/{}/alerts/{}",
	"PUT /admin/v1/projects/{}/alerts/{}",
	"DELETE /admin/v1/projects/{}/alerts/{}",
	"GET /admin/v1/projects/{}/cursors",
	"DELETE /admin/v1/projects/{}/cursors/{}",
	"POST /admin/v1/projects/{}/cursors/{}/reset",
	"GET /admin/v1/projects/{}/usage",
	"DELETE /admin/v1/projects/{}/visitors/{}",
	"GET /admin/v1/jobs/{}",
	"GET /admin/v1/projects/{}/profiles",
	"GET /admin/v1/projects/{}/profiles/{}",
	"POST /admin/v1/projects/{}/import",
	"GET /admin/v1/projects/{}/export",
	"POST /admin/v1/backup",
	"GET /debug/pprof/{}",
	"GET /metrics",
	// web dashboard (admin listener)
	"GET /",
	"GET /login",
	"POST /login",
	"POST /logout",
	"GET /session",
	"GET /assets/{}",
	"GET /assets/pages/{}",
	"GET /admin/v1/projects/{}/analytics",
	"GET /admin/v1/projects/{}/stream",
}

// adminWithoutToken are the admin-listener routes that need no admin token.
// The dashboard's page sends a browser without a session to its login page,
// and its static code holds no data.
var adminWithoutToken = []string{"GET /metrics", "GET /", "GET /login", "POST /login", "GET /assets/{file}", "GET /assets/pages/{file}"}

// adminSessionOnly are the admin-listener routes of the dashboard session itself.
var adminSessionOnly = []string{"POST /logout", "GET /session"}

// wantSchemas are component schemas other packages and clients rely on by name.
var wantSchemas = []string{
	"EventCreate", "BatchEntry", "BatchCreate", "CreateEventResponse", "BatchResponse",
	"Profile", "ProfileSummary", "ProfileList", "CursorPagination",
	"Event", "ListItem", "EventList", "Pagination", "Verify", "RateLimitStatus", "Error",
	"StreamEventMessage", "StreamSubscribe", "StreamSubscribed", "StreamError",
	"AnalyticsTimeseries", "AnalyticsBreakdown", "AnalyticsFunnel", "AnalyticsGoals",
	"Project", "Key", "KeyCreated", "EventDefinition", "Goal", "Funnel", "Webhook",
	"WebhookCreated", "Delivery", "Alert", "Usage", "Job",
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// ---------------------------------------------------------------------------------------------
// TestOpenAPIValid

func TestOpenAPIValid(t *testing.T) {
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	problems := checkDocument(spec)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestOpenAPIValidatorCatchesErrors runs the same checks on a deliberately broken document, so
// that a check that silently stopped working is noticed.
func TestOpenAPIValidatorCatchesErrors(t *testing.T) {
	for file, wants := range map[string][]string{
		"testdata/invalid_refs.yaml": {
			"meta-schema",                         // info.version missing
			"#/components/schemas/Missing",        // dangling $ref
			"#/components/schemas/Gone",           // dangling discriminator mapping
			"path parameter {id} is not declared", // undeclared path parameter
		},
		"testdata/invalid_example.yaml": {
			"example does not match its schema",
			"/$defs/Name/minLength", // schema keyword of the wrong type
		},
	} {
		spec, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		problems := strings.Join(checkDocument(spec), "\n")
		for _, want := range wants {
			if !strings.Contains(problems, want) {
				t.Errorf("checks of %s did not report %q; they reported:\n%s", file, want, problems)
			}
		}
	}
}

// checkDocument validates an OpenAPI 3.1 document and returns every problem found, each with
// its location (line:column or JSON pointer).
func checkDocument(spec []byte) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	cfg := datamodel.NewDocumentConfiguration()
	cfg.Logger = slog.New(slog.DiscardHandler) // every problem is reported through problems
	doc, err := libopenapi.NewDocumentWithConfiguration(spec, cfg)
	if err != nil {
		return []string{fmt.Sprintf("parse: %v", err)}
	}
	info := doc.GetSpecInfo()
	if info.Version != "3.1.0" {
		add("openapi version is %q, want 3.1.0", info.Version)
	}

	// 1. The document against the OpenAPI 3.1 meta-schema.
	if ok, verrs := schema_validation.ValidateOpenAPIDocument(doc); !ok {
		for _, e := range verrs {
			add("meta-schema: %s", describeValidationError(e))
		}
	}

	// 2. Every $ref (and discriminator mapping) resolves inside the document.
	root := info.RootNode
	for _, p := range checkRefs(root) {
		add("%s", p)
	}

	// 3. The model builds (libopenapi resolves references and reports cycles and bad shapes).
	model, err := doc.BuildV3Model()
	if err != nil {
		add("build model: %v", err)
	}
	if model == nil {
		return problems
	}
	if _, errs := validator.NewValidator(doc); len(errs) > 0 {
		for _, e := range errs {
			add("validator: %v", e)
		}
	}

	// 4. Path templates and declared path parameters agree.
	for _, p := range checkPathParams(root) {
		add("%s", p)
	}

	// 5. Every schema, as written, is valid JSON Schema 2020-12 (the model drops keywords it
	// cannot read, so this check works on the raw document).
	for _, p := range checkRawSchemas(spec) {
		add("%s", p)
	}

	// 6. Every schema compiles and every example matches its schema.
	for _, p := range checkExamples(&model.Model) {
		add("%s", p)
	}
	sort.Strings(problems)
	return slices.Compact(problems)
}

func describeValidationError(e *liberrors.ValidationError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d:%d: %s: %s", e.SpecLine, e.SpecCol, e.Message, e.Reason)
	for _, s := range e.SchemaValidationErrors {
		loc := s.FieldPath
		if loc == "" {
			loc = strings.Join(s.InstancePath, "/")
		}
		fmt.Fprintf(&b, "\n\t%s (line %d:%d, keyword %s): %s", loc, s.Line, s.Column, s.KeywordLocation, s.Reason)
	}
	return b.String()
}

// ---------------------------------------------------------------------------------------------
// YAML node helpers

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && (n.Kind == yaml.AliasNode || n.Kind == yaml.DocumentNode) {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else if len(n.Content) > 0 {
			n = n.Content[0]
		} else {
			return nil
		}
	}
	return n
}

func mapGet(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return deref(n.Content[i+1])
		}
	}
	return nil
}

func mapKeys(n *yaml.Node) []string {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	keys := make([]string, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	return keys
}

// resolvePointer resolves a local reference ("#/a/b~1c") against the document root.
func resolvePointer(root *yaml.Node, ref string) *yaml.Node {
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	n := deref(root)
	ptr := strings.TrimPrefix(ref, "#")
	if ptr == "" {
		return n
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n.Kind {
		case yaml.MappingNode:
			n = mapGet(n, tok)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = deref(n.Content[i])
		default:
			return nil
		}
		if n == nil {
			return nil
		}
	}
	return n
}

// follow resolves a chain of $ref objects to the node they finally point to.
func follow(root, n *yaml.Node) *yaml.Node {
	for i := 0; i < 16 && n != nil; i++ {
		ref := mapGet(n, "$ref")
		if ref == nil {
			return n
		}
		n = resolvePointer(root, ref.Value)
	}
	return n
}

func checkRefs(root *yaml.Node) []string {
	var problems []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n == nil || n.Kind == yaml.AliasNode { // aliases are walked where they are defined
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s/%d", path, i))
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], deref(n.Content[i+1])
				if k.Value == "$ref" && v.Kind == yaml.ScalarNode {
					if !strings.HasPrefix(v.Value, "#/") {
						problems = append(problems, fmt.Sprintf("line %d:%d: %s: $ref %q is not a local reference", v.Line, v.Column, path, v.Value))
					} else if resolvePointer(root, v.Value) == nil {
						problems = append(problems, fmt.Sprintf("line %d:%d: %s: $ref %q does not resolve", v.Line, v.Column, path, v.Value))
					}
				}
				if k.Value == "discriminator" && v.Kind == yaml.MappingNode {
					for _, name := range mapKeys(mapGet(v, "mapping")) {
						target := mapGet(mapGet(v, "mapping"), name)
						if resolvePointer(root, target.Value) == nil {
							problems = append(problems, fmt.Sprintf("line %d:%d: %s/discriminator/mapping/%s: %q does not resolve", target.Line, target.Column, path, name, target.Value))
						}
					}
				}
				walk(n.Content[i+1], path+"/"+strings.ReplaceAll(strings.ReplaceAll(k.Value, "~", "~0"), "/", "~1"))
			}
		}
	}
	walk(root, "#")
	return problems
}

var templateParam = regexp.MustCompile(`\{([^}]+)\}`)

func checkPathParams(root *yaml.Node) []string {
	var problems []string
	paths := mapGet(root, "paths")
	for _, p := range mapKeys(paths) {
		item := mapGet(paths, p)
		var want []string
		for _, m := range templateParam.FindAllStringSubmatch(p, -1) {
			want = append(want, m[1])
		}
		declared := func(list *yaml.Node) map[string]bool {
			got := map[string]bool{}
			if list == nil {
				return got
			}
			for _, c := range list.Content {
				param := follow(root, deref(c))
				if param != nil && mapGet(param, "in") != nil && mapGet(param, "in").Value == "path" {
					got[mapGet(param, "name").Value] = true
				}
			}
			return got
		}
		pathLevel := declared(mapGet(item, "parameters"))
		for _, method := range httpMethods {
			op := mapGet(item, method)
			if op == nil {
				continue
			}
			got := declared(mapGet(op, "parameters"))
			for k := range pathLevel {
				got[k] = true
			}
			for _, w := range want {
				if !got[w] {
					problems = append(problems, fmt.Sprintf("line %d: %s %s: path parameter {%s} is not declared", op.Line, strings.ToUpper(method), p, w))
				}
				delete(got, w)
			}
			for extra := range got {
				problems = append(problems, fmt.Sprintf("line %d: %s %s: path parameter %q is not in the path", op.Line, strings.ToUpper(method), p, extra))
			}
		}
	}
	return problems
}

// checkRawSchemas gathers every schema of the document (components.schemas and every inline
// "schema") as $defs of one JSON Schema 2020-12 resource and compiles it, which validates each
// against the 2020-12 meta-schema and resolves every reference between them.
func checkRawSchemas(spec []byte) []string {
	var doc map[string]any
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return []string{fmt.Sprintf("raw schemas: %v", err)}
	}
	defs := map[string]any{}
	if comp, ok := doc["components"].(map[string]any); ok {
		if schemas, ok := comp["schemas"].(map[string]any); ok {
			for name, s := range schemas {
				defs[name] = s
			}
		}
	}
	var collect func(v any, path string)
	collect = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				switch {
				case path == "#/components" && k == "schemas":
					continue // already gathered
				case k == "example" || k == "examples" || k == "properties":
					continue // values, or property names that may be called "schema"
				case k == "schema":
					defs["inline:"+strings.ReplaceAll(path, "/", "|")] = c
				}
				collect(c, path+"/"+k)
			}
		case []any:
			for i, c := range v {
				collect(c, fmt.Sprintf("%s/%d", path, i))
			}
		}
	}
	collect(doc, "#")
	var rewrite func(v any) any
	rewrite = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, c := range v {
				if s, ok := c.(string); ok && k == "$ref" {
					out[k] = strings.Replace(s, "#/components/schemas/", "#/$defs/", 1)
				} else {
					out[k] = rewrite(c)
				}
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, c := range v {
				out[i] = rewrite(c)
			}
			return out
		}
		return v
	}
	resource := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$defs":   rewrite(defs),
	}
	b, err := json.Marshal(resource)
	if err != nil {
		return []string{fmt.Sprintf("raw schemas: %v", err)}
	}
	if _, err := helpers.NewCompiledSchema("openapi-schemas.json", b, config.NewValidationOptions()); err != nil {
		return []string{fmt.Sprintf("raw schemas are not valid JSON Schema 2020-12 ($defs/inline:<path> is the schema at <path>, | for /): %v", err)}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// Examples

type exampleChecker struct {
	sv       schema_validation.SchemaValidator
	problems []string
}

func (c *exampleChecker) schema(where string, proxy *base.SchemaProxy) *base.Schema {
	if proxy == nil {
		return nil
	}
	s, err := proxy.BuildSchema()
	if err != nil || s == nil {
		c.problems = append(c.problems, fmt.Sprintf("%s: schema does not build: %v", where, err))
		return nil
	}
	if ok, errs := c.sv.ValidateSchemaObject(s, nil); !ok {
		for _, e := range errs {
			c.problems = append(c.problems, fmt.Sprintf("%s: schema does not compile: %s", where, describeValidationError(e)))
		}
		return nil
	}
	return s
}

func (c *exampleChecker) value(where string, s *base.Schema, n *yaml.Node) {
	if s == nil || n == nil {
		return
	}
	var v any
	if err := n.Decode(&v); err != nil {
		c.problems = append(c.problems, fmt.Sprintf("line %d: %s: example does not decode: %v", n.Line, where, err))
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("line %d: %s: example is not JSON: %v", n.Line, where, err))
		return
	}
	if ok, errs := c.sv.ValidateSchemaBytes(s, b); !ok {
		for _, e := range errs {
			c.problems = append(c.problems, fmt.Sprintf("line %d: %s: example does not match its schema: %s", n.Line, where, describeValidationError(e)))
		}
	}
}

func (c *exampleChecker) examples(where string, s *base.Schema, example *yaml.Node, examples *orderedmap.Map[string, *base.Example]) {
	c.value(where+" example", s, example)
	for name, ex := range examples.FromOldest() {
		if ex != nil {
			c.value(where+" examples/"+name, s, ex.Value)
		}
	}
}

func isJSONMedia(mt string) bool {
	mt = strings.TrimSpace(strings.SplitN(mt, ";", 2)[0])
	return mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/plain"
}

func (c *exampleChecker) content(where string, content *orderedmap.Map[string, *v3.MediaType]) {
	for name, mt := range content.FromOldest() {
		s := c.schema(where+" "+name, mt.Schema)
		if !isJSONMedia(name) {
			continue // NDJSON, JavaScript, Prometheus text: examples are plain text
		}
		c.examples(where+" "+name, s, mt.Example, mt.Examples)
	}
}

func (c *exampleChecker) params(where string, params []*v3.Parameter) {
	for _, p := range params {
		if p == nil {
			continue
		}
		w := fmt.Sprintf("%s parameter %s", where, p.Name)
		s := c.schema(w, p.Schema)
		c.examples(w, s, p.Example, p.Examples)
	}
}

func (c *exampleChecker) pathItems(prefix string, items *orderedmap.Map[string, *v3.PathItem]) {
	for path, item := range items.FromOldest() {
		c.params(prefix+path, item.Parameters)
		for method, op := range item.GetOperations().FromOldest() {
			where := strings.ToUpper(method) + " " + prefix + path
			c.params(where, op.Parameters)
			if op.RequestBody != nil {
				c.content(where+" request", op.RequestBody.Content)
			}
			if op.Responses != nil {
				for code, r := range op.Responses.Codes.FromOldest() {
					c.content(where+" "+code, r.Content)
					for hn, h := range r.Headers.FromOldest() {
						hs := c.schema(where+" "+code+" header "+hn, h.Schema)
						c.examples(where+" "+code+" header "+hn, hs, h.Example, h.Examples)
					}
				}
			}
		}
	}
}

func checkExamples(doc *v3.Document) []string {
	c := &exampleChecker{sv: schema_validation.NewSchemaValidator(config.WithFormatAssertions())}
	if doc.Paths != nil {
		c.pathItems("", doc.Paths.PathItems)
	}
	c.pathItems("webhooks/", doc.Webhooks)
	if comp := doc.Components; comp != nil {
		for name, proxy := range comp.Schemas.FromOldest() {
			s := c.schema("#/components/schemas/"+name, proxy)
			if s != nil {
				for i, ex := range s.Examples {
					c.value(fmt.Sprintf("#/components/schemas/%s examples/%d", name, i), s, ex)
				}
			}
		}
		for name, r := range comp.Responses.FromOldest() {
			c.content("#/components/responses/"+name, r.Content)
		}
		for name, rb := range comp.RequestBodies.FromOldest() {
			c.content("#/components/requestBodies/"+name, rb.Content)
		}
		for name, p := range comp.Parameters.FromOldest() {
			c.params("#/components/parameters", []*v3.Parameter{p})
			_ = name
		}
		for name, h := range comp.Headers.FromOldest() {
			w := "#/components/headers/" + name
			c.examples(w, c.schema(w, h.Schema), h.Example, h.Examples)
		}
	}
	return c.problems
}

// ---------------------------------------------------------------------------------------------
// TestOpenAPIOperations

type operation struct {
	method, path string
	node         *yaml.Node
	item         *yaml.Node
}

func (o operation) String() string {
	return fmt.Sprintf("%s %s (line %d)", strings.ToUpper(o.method), o.path, o.node.Line)
}

func loadRoot(t *testing.T) *yaml.Node {
	t.Helper()
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(spec, &root); err != nil {
		t.Fatal(err)
	}
	return &root
}

func operations(root *yaml.Node, section string) []operation {
	var ops []operation
	paths := mapGet(root, section)
	for _, p := range mapKeys(paths) {
		item := follow(root, mapGet(paths, p))
		for _, m := range httpMethods {
			if op := mapGet(item, m); op != nil {
				ops = append(ops, operation{method: m, path: p, node: op, item: item})
			}
		}
	}
	return ops
}

func serverURL(root *yaml.Node, op operation) string {
	for _, n := range []*yaml.Node{op.node, op.item, root} {
		if s := mapGet(n, "servers"); s != nil && len(s.Content) > 0 {
			return mapGet(s.Content[0], "url").Value
		}
	}
	return "/"
}

// securitySchemes returns the names of the schemes of the operation's effective security
// requirements; an empty requirement ({}) is reported as "".
func securitySchemes(root *yaml.Node, op operation) []string {
	sec := mapGet(op.node, "security")
	if sec == nil {
		sec = mapGet(root, "security")
	}
	var names []string
	if sec == nil {
		return nil
	}
	for _, req := range sec.Content {
		keys := mapKeys(req)
		if len(keys) == 0 {
			names = append(names, "")
		}
		names = append(names, keys...)
	}
	return names
}

func headerRef(h *yaml.Node) string {
	if r := mapGet(h, "$ref"); r != nil {
		return r.Value
	}
	return ""
}

func TestOpenAPIOperations(t *testing.T) {
	root := loadRoot(t)
	ops := operations(root, "paths")
	if len(ops) == 0 {
		t.Fatal("no operations")
	}

	// Routes: every wanted route documented, every documented route wanted.
	normalize := regexp.MustCompile(`\{[^}]*\}`)
	documented := map[string]bool{}
	for _, op := range ops {
		documented[strings.ToUpper(op.method)+" "+normalize.ReplaceAllString(op.path, "{}")] = true
	}
	wanted := map[string]bool{}
	for _, r := range wantRoutes {
		if wanted[r] {
			t.Errorf("wantRoutes lists %q twice", r)
		}
		wanted[r] = true
		if !documented[r] {
			t.Errorf("route %q is missing from %s", r, specPath)
		}
	}
	for r := range documented {
		if !wanted[r] {
			t.Errorf("route %q is documented but not in wantRoutes; add it there", r)
		}
	}

	schemas := mapGet(mapGet(root, "components"), "schemas")
	for _, s := range wantSchemas {
		if mapGet(schemas, s) == nil {
			t.Errorf("components.schemas.%s is missing", s)
		}
	}

	ids := map[string]string{}
	allOps := append(ops, operations(root, "webhooks")...)
	for _, op := range allOps {
		id := mapGet(op.node, "operationId")
		switch {
		case id == nil || id.Value == "":
			t.Errorf("%s: no operationId", op)
		case ids[id.Value] != "":
			t.Errorf("%s: operationId %q already used by %s", op, id.Value, ids[id.Value])
		default:
			ids[id.Value] = op.String()
		}
		if s := mapGet(op.node, "summary"); s == nil || strings.TrimSpace(s.Value) == "" {
			t.Errorf("%s: no summary", op)
		}
		if tags := mapGet(op.node, "tags"); tags == nil || len(tags.Content) == 0 {
			t.Errorf("%s: no tags", op)
		}
		success := false
		for _, code := range mapKeys(mapGet(op.node, "responses")) {
			if strings.HasPrefix(code, "1") || strings.HasPrefix(code, "2") {
				success = true
			}
		}
		if !success {
			t.Errorf("%s: no 1xx or 2xx response", op)
		}
	}

	for _, op := range ops {
		checkOperation(t, root, op)
	}
}

func checkOperation(t *testing.T, root *yaml.Node, op operation) {
	t.Helper()
	responses := mapGet(op.node, "responses")
	codes := mapKeys(responses)
	has := func(code string) bool { return slices.Contains(codes, code) }
	schemes := securitySchemes(root, op)
	authenticated := len(schemes) > 0 && !slices.Contains(schemes, "")
	server := serverURL(root, op)
	tags := mapGet(op.node, "tags")
	var tagList []string
	if tags != nil {
		for _, c := range tags.Content {
			tagList = append(tagList, c.Value)
		}
	}
	bucket := ""
	if b := mapGet(op.node, "x-eventd-rate-limit-bucket"); b != nil {
		bucket = b.Value
	}
	var keyTypes []string
	if k := mapGet(op.node, "x-eventd-key-types"); k != nil {
		for _, c := range k.Content {
			keyTypes = append(keyTypes, c.Value)
		}
	}

	switch server {
	case publicURL:
		if slices.Contains(tagList, "admin") {
			t.Errorf("%s: tagged admin but served on the public listener", op)
		}
		if authenticated {
			if want := publicSchemes(tagList); !slices.Equal(schemes, want) {
				t.Errorf("%s: security schemes %v, want %v", op, schemes, want)
			}
			if !has("401") {
				t.Errorf("%s: authenticated but no 401", op)
			}
			switch bucket {
			case "standard", "batch", "analytics":
				if !has("429") {
					t.Errorf("%s: counts in the %s bucket but no 429", op, bucket)
				}
			case "none":
				if has("429") {
					t.Errorf("%s: counts in no bucket but lists 429", op)
				}
			default:
				t.Errorf("%s: x-eventd-rate-limit-bucket is %q, want standard, batch, analytics or none", op, bucket)
			}
			if len(keyTypes) == 0 {
				t.Errorf("%s: no x-eventd-key-types", op)
			}
			for _, k := range keyTypes {
				if k != "public" && k != "secret" {
					t.Errorf("%s: unknown key type %q", op, k)
				}
			}
			// 403 for a refused Origin on every route, and for public keys on read routes.
			want403 := "#/components/responses/Forbidden"
			if slices.Contains(keyTypes, "public") {
				want403 = "#/components/responses/ForbiddenOrigin"
			}
			if got := headerRef(mapGet(responses, "403")); got != want403 {
				t.Errorf("%s: 403 is %q, want %s", op, got, want403)
			}
		}
		if rb := follow(root, mapGet(op.node, "requestBody")); rb != nil {
			if !has("415") {
				t.Errorf("%s: has a request body but no 415", op)
			}
			if !has("413") {
				t.Errorf("%s: has a request body but no 413", op)
			}
		}
	case adminURL:
		if !slices.Contains(tagList, "admin") {
			t.Errorf("%s: on the admin listener but not tagged admin", op)
		}
		route := strings.ToUpper(op.method) + " " + op.path
		if slices.Contains(adminWithoutToken, route) {
			if authenticated {
				t.Errorf("%s: needs no admin token but lists security %v", op, schemes)
			}
			break
		}
		// Every admin operation takes the token or a dashboard session (security: *adminSecurity).
		if slices.Contains(adminSessionOnly, route) {
			if !slices.Equal(schemes, []string{"dashboardSession"}) {
				t.Errorf("%s: security schemes %v, want dashboardSession", op, schemes)
			}
		} else if !slices.Equal(schemes, []string{"adminToken", "dashboardSession"}) {
			t.Errorf("%s: security schemes %v, want adminToken or dashboardSession (*adminSecurity)", op, schemes)
		}
		if !has("401") {
			t.Errorf("%s: no 401", op)
		}
	default:
		t.Errorf("%s: server %q is neither %s nor %s", op, server, publicURL, adminURL)
	}

	if !has("500") && op.method != "options" && op.method != "head" {
		t.Errorf("%s: no 500", op)
	}
	if mapGet(op.node, "requestBody") != nil && !has("400") {
		t.Errorf("%s: has a request body but no 400", op)
	}
	if op.method == "options" && !has("204") {
		t.Errorf("%s: preflight without 204", op)
	}

	for _, code := range codes {
		r := follow(root, mapGet(responses, code))
		where := fmt.Sprintf("%s response %s", op, code)
		if r == nil {
			t.Errorf("%s: does not resolve", where)
			continue
		}
		headers := mapGet(r, "headers")
		if headerRef(mapGet(headers, "X-Request-Id")) != requestIDRef {
			t.Errorf("%s: does not reference %s", where, requestIDRef)
		}
		n, _ := strconv.Atoi(code)
		if code == "429" || code == "503" {
			if headerRef(mapGet(headers, "Retry-After")) != "#/components/headers/Retry-After" {
				t.Errorf("%s: no Retry-After header", where)
			}
		}
		if server == publicURL && authenticated && code != "401" {
			for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"} {
				if headerRef(mapGet(headers, h)) != "#/components/headers/"+h {
					t.Errorf("%s: does not reference header %s", where, h)
				}
			}
		}
		if n >= 400 {
			schema := mapGet(mapGet(mapGet(r, "content"), "application/json"), "schema")
			if all := mapGet(schema, "allOf"); all != nil && len(all.Content) > 0 {
				schema = all.Content[0] // an Error with extra fields
			}
			if headerRef(schema) != "#/components/schemas/Error" {
				t.Errorf("%s: error response body is not #/components/schemas/Error", where)
			}
		}
	}
	if has("409") && op.path == "/events" && op.method == "post" {
		headers := mapGet(follow(root, mapGet(responses, "201")), "headers")
		if headerRef(mapGet(headers, "Idempotent-Replayed")) == "" {
			t.Errorf("%s: 201 does not document Idempotent-Replayed", op)
		}
	}
}

// TestOpenAPIErrorExamples checks that every error code has an example with the exact messages
// the contract fixes.
func TestOpenAPIErrorExamples(t *testing.T) {
	root := loadRoot(t)
	codes := map[string]bool{}
	for _, c := range mapGet(mapGet(mapGet(mapGet(root, "components"), "schemas"), "ErrorCode"), "enum").Content {
		codes[c.Value] = false
	}
	fixed := map[string]string{
		"unauthorized":        "Invalid or missing API key",
		"forbidden":           "API key does not have permission for this resource",
		"rate_limit_exceeded": "Rate limit exceeded",
	}
	sawEventNotFound := false
	var visit func(n *yaml.Node)
	visit = func(n *yaml.Node) {
		n = deref(n)
		if n == nil {
			return
		}
		if n.Kind == yaml.MappingNode {
			if e, m := mapGet(n, "error"), mapGet(n, "message"); e != nil && m != nil && e.Kind == yaml.ScalarNode && m.Kind == yaml.ScalarNode {
				if _, ok := codes[e.Value]; ok {
					codes[e.Value] = true
					// The admin token and a refused Origin have messages of their own.
					other := strings.Contains(m.Value, "admin token") || strings.HasPrefix(m.Value, "Origin ") ||
						strings.HasPrefix(m.Value, "Too many open streams") ||
						strings.Contains(m.Value, "CSRF token") || m.Value == "Cross-origin request refused"
					if want, ok := fixed[e.Value]; ok && m.Value != want && !other {
						t.Errorf("line %d: %s example message %q, want %q", m.Line, e.Value, m.Value, want)
					}
					if e.Value == "not_found" && m.Value == "Event not found" {
						sawEventNotFound = true
					}
					if e.Value == "rate_limit_exceeded" && mapGet(n, "retry_after") == nil {
						t.Errorf("line %d: rate_limit_exceeded example without retry_after", e.Line)
					}
					if e.Value == "validation_error" {
						if d := mapGet(mapGet(n, "details"), "properties.amount"); d != nil && d.Value != "must be a positive number" {
							t.Errorf("line %d: properties.amount detail %q", d.Line, d.Value)
						}
					}
				}
			}
		}
		for _, c := range n.Content {
			visit(c)
		}
	}
	visit(mapGet(root, "components"))
	visit(mapGet(root, "paths"))
	for code, seen := range codes {
		if !seen {
			t.Errorf("no example of error %q", code)
		}
	}
	if !sawEventNotFound {
		t.Error(`no example with message "Event not found"`)
	}
}

// publicSchemes is the security an authenticated public operation must
// list: the Segment routes take HTTP Basic first, as Segment's SDKs send it.
func publicSchemes(tags []string) []string {
	if slices.Contains(tags, "segment") {
		return []string{"basicAuth", "bearerAuth", "apiKeyQuery"}
	}
	return []string{"bearerAuth", "apiKeyQuery"}
}
