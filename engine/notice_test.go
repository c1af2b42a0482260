package engine

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// TestNoticePayload: the stream's typed messages carry the webhook bodies'
// data under their type, with created_at.
func TestNoticePayload(t *testing.T) {
	var id storage.ID
	id[0] = 1
	at := time.Date(2026, 1, 15, 10, 30, 0, 500e6, time.UTC)
	cases := []struct {
		kind string
		data map[string]any
		want string
	}{
		{actors.KindGoalCompleted, actors.GoalCompletedData(actors.GoalCompletion{GoalID: "goal_1", Name: "Big \"one\"", EventID: id}),
			`{"type":"goal.completed","created_at":"2026-01-15T10:30:00.500Z","data":{"event_id":"` + ids.FormatEvent(id) + `","goal_id":"goal_1","name":"Big \"one\"","visitor_id":null}}`},
		{actors.KindGoalCompleted, actors.GoalCompletedData(actors.GoalCompletion{GoalID: "goal_1", Name: "n", VisitorID: "v_1", HasVisitor: true, EventID: id}),
			`{"type":"goal.completed","created_at":"2026-01-15T10:30:00.500Z","data":{"event_id":"` + ids.FormatEvent(id) + `","goal_id":"goal_1","name":"n","visitor_id":"v_1"}}`},
		{actors.KindUsageAlert, actors.UsageAlertData(&actors.UsageAlert{AlertID: "alt_1", KeyID: "key_1", Window: "day", Limit: 20, Used: 10, Threshold: 50}),
			`{"type":"usage.alert","created_at":"2026-01-15T10:30:00.500Z","data":{"alert_id":"alt_1","key_id":"key_1","limit":20,"threshold":50,"used":10,"window":"day"}}`},
	}
	for _, tc := range cases {
		got := NoticePayload(tc.kind, at, tc.data)
		if string(got) != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil || !reflect.DeepEqual(keys(m), []string{"created_at", "data", "type"}) {
			t.Errorf("%s: not a {type, created_at, data} object: %v", got, err)
		}
	}
}

func keys(m map[string]any) []string {
	out := []string{}
	for _, k := range []string{"created_at", "data", "type"} {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	if len(out) != len(m) {
		return nil
	}
	return out
}
