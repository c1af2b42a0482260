package http

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fasthttp/router"
	"go.yaml.in/yaml/v4"

	"github.com/eventd/eventd/engine"
)

// paramRE matches a path parameter, including router catch-alls ({name:*}).
var paramRE = regexp.MustCompile(`\{[^}]*\}`)

// TestRoutesDocumented fails when a route is served but missing from
// docs/openapi.yaml, so the document cannot drift behind the code.
func TestRoutesDocumented(t *testing.T) {
	eng, err := engine.Open(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := New(Config{Engine: eng, AdminToken: "t"})

	raw, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// Parameter names may differ ({id} here, {project_id} there): compare shapes.
	documented := map[string]map[string]any{}
	for p, ops := range doc.Paths {
		documented[paramRE.ReplaceAllString(p, "{}")] = ops
	}
	// Routes that exist only to answer an error are not operations.
	undocumented := map[string]bool{"GET /events/batch": true} // 405, so "batch" is not read as an event id
	for name, r := range map[string]*router.Router{"public": s.publicRouter, "admin": s.adminRouter} {
		for method, paths := range r.List() {
			for _, p := range paths {
				if undocumented[method+" "+p] {
					continue
				}
				ops, ok := documented[paramRE.ReplaceAllString(p, "{}")]
				if !ok {
					t.Errorf("%s route %s %s is not in docs/openapi.yaml", name, method, p)
					continue
				}
				if _, ok := ops[strings.ToLower(method)]; !ok {
					t.Errorf("%s route %s %s: the path is documented but not this method", name, method, p)
				}
			}
		}
	}
}
