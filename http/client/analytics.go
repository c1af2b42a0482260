package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// Analytics runs GET /analytics with params as the query (type, metric,
// property, event, visitor_id, from, to, interval, group_by, limit, steps,
// funnel_id, window) and returns the typed result: the field named by
// Result.Type is set, the others are nil. Needs a secret key; 50 requests a
// minute.
func (c *Client) Analytics(ctx context.Context, params url.Values) (*AnalyticsResult, error) {
	var out AnalyticsResult
	if err := c.getJSON(ctx, "/analytics", params, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AnalyticsResult is one answer of GET /analytics; Type says which of the
// other fields holds it.
type AnalyticsResult struct {
	Type       string      // "timeseries", "breakdown", "funnel" or "goals"
	Timeseries *Timeseries // type=timeseries
	Breakdown  *Breakdown  // type=breakdown
	Funnel     *Funnel     // type=funnel
	Goals      *Goals      // type=goals
}

// Timeseries is a metric per time bucket over a range.
type Timeseries struct {
	Metric   string    `json:"metric"`   // count, unique_visitors, sum or avg
	Interval string    `json:"interval"` // minute, hour, day, week or month
	From     time.Time `json:"from"`     // start of the range, inclusive
	To       time.Time `json:"to"`       // end of the range, inclusive
	Total    float64   `json:"total"`    // the metric over the whole range
	Data     []Point   `json:"data"`     // every bucket, oldest first; empty ones are 0
}

// Point is one bucket of a Timeseries.
type Point struct {
	Timestamp time.Time `json:"timestamp"` // start of the bucket (UTC)
	Value     float64   `json:"value"`
}

// Breakdown is a metric per event name or property value, largest first.
type Breakdown struct {
	Metric  string         `json:"metric"`
	GroupBy string         `json:"group_by"` // "event" or "properties.<name>"
	Total   float64        `json:"total"`
	Data    []BreakdownRow `json:"data"` // at most the query's limit rows
}

// BreakdownRow is one group of a Breakdown.
type BreakdownRow struct {
	Key   string  `json:"key"` // the event name, or the property value as a string
	Value float64 `json:"value"`
}

// Funnel is how many visitors went through the steps in order.
type Funnel struct {
	WindowSeconds int64        `json:"window"` // the steps happened within this many seconds of the first
	Steps         []FunnelStep `json:"steps"`
}

// Window is WindowSeconds as a duration.
func (f *Funnel) Window() time.Duration { return time.Duration(f.WindowSeconds) * time.Second }

// FunnelStep is one step of a Funnel.
type FunnelStep struct {
	Event          string  `json:"event"`
	Visitors       int64   `json:"visitors"`        // visitors who reached this step in order
	ConversionRate float64 `json:"conversion_rate"` // Visitors / the first step's Visitors (0 when that is 0)
}

// Goals lists every goal of the key's project with its completions.
type Goals struct {
	Data []GoalResult `json:"data"`
}

// GoalResult is one goal's completions over the range.
type GoalResult struct {
	GoalID      string `json:"goal_id"`
	Name        string `json:"name"`
	Completions int64  `json:"completions"`
	Visitors    int64  `json:"visitors"`
}

// UnmarshalJSON reads the object of GET /analytics into the field its
// "type" names; an unknown type (a newer server) is an error rather than an
// empty result, so it cannot be mistaken for "no data".
func (r *AnalyticsResult) UnmarshalJSON(b []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	*r = AnalyticsResult{Type: head.Type}
	var target any
	switch head.Type {
	case "timeseries":
		r.Timeseries = &Timeseries{}
		target = r.Timeseries
	case "breakdown":
		r.Breakdown = &Breakdown{}
		target = r.Breakdown
	case "funnel":
		r.Funnel = &Funnel{}
		target = r.Funnel
	case "goals":
		r.Goals = &Goals{}
		target = r.Goals
	default:
		return fmt.Errorf("eventd: analytics result of unknown type %q", head.Type)
	}
	return json.Unmarshal(b, target)
}
