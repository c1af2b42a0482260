package docs

import (
	"slices"
	"testing"

	"github.com/eventd/eventd/engine/analytics"
)

// TestOpenAPIAnalyticsParams: both analytics routes (the public one and the
// dashboard's admin one) document every parameter the server takes, bots
// included, and every answer that takes bots documents bots_excluded.
func TestOpenAPIAnalyticsParams(t *testing.T) {
	root := loadRoot(t)
	for _, op := range operations(root, "paths") {
		if op.method != "get" || (op.path != "/analytics" && op.path != "/admin/v1/projects/{project_id}/analytics") {
			continue
		}
		var names []string
		for _, p := range mapGet(op.node, "parameters").Content {
			if n := mapGet(follow(root, p), "name"); n != nil {
				names = append(names, n.Value)
			}
		}
		for _, want := range analytics.Params() {
			if !slices.Contains(names, want) {
				t.Errorf("%s does not document the parameter %q", op, want)
			}
		}
	}
	schemas := mapGet(mapGet(root, "components"), "schemas")
	for _, s := range []string{"AnalyticsTimeseries", "AnalyticsBreakdown", "AnalyticsFunnel", "AnalyticsSessions", "AnalyticsRetention", "AnalyticsPaths"} {
		if mapGet(mapGet(mapGet(schemas, s), "properties"), "bots_excluded") == nil {
			t.Errorf("components.schemas.%s has no bots_excluded", s)
		}
	}
	if mapGet(mapGet(mapGet(schemas, "AnalyticsGoals"), "properties"), "bots_excluded") != nil {
		t.Errorf("AnalyticsGoals documents bots_excluded, but type=goals does not take bots")
	}
}
