package analytics

import (
	"strconv"
	"strings"

	"github.com/eventd/eventd/engine/event"
)

// Type is the kind of analytics result.
type Type uint8

// Result kinds of GET /analytics.
const (
	Timeseries Type = iota
	Breakdown
	Funnel
	Goals
	Retention
	Paths
	Sessions
)

var typeNames = [...]string{"timeseries", "breakdown", "funnel", "goals", "retention", "paths", "sessions"}

// String is the type's name as the API spells it.
func (t Type) String() string { return typeNames[t] }

// Metric is what a timeseries or breakdown value measures.
type Metric uint8

// Metrics of timeseries and breakdowns.
const (
	Count Metric = iota
	UniqueVisitors
	Sum
	Avg
)

var metricNames = [...]string{"count", "unique_visitors", "sum", "avg"}

// String is the metric's name as the API spells it.
func (m Metric) String() string { return metricNames[m] }

// Limits and defaults of the query parameters.
const (
	DefaultRangeMs     = 7 * dayMs
	DefaultLimit       = 10
	MaxLimit           = 100
	DefaultWindow      = 86_400      // seconds
	MaxWindow          = 365 * 86400 // seconds
	MinSteps, MaxSteps = 2, 10
	MaxPropertyLen     = 128 // as storage.MaxRollupPropertyLen: longer names are never rolled up
)

// Query is a parsed GET /analytics request.
type Query struct {
	Type       Type
	Metric     Metric
	Property   string // numeric property of sum and avg
	Event      string // "" for every event
	VisitorID  string
	HasVisitor bool
	From, To   int64 // inclusive Unix ms
	Interval   Interval
	// GroupBy is "event" or "properties.<name>"; GroupProperty is <name>.
	GroupBy       string
	GroupProperty string
	Limit         int
	Steps         []string
	FunnelID      string
	Window        int64 // seconds
	WindowSet     bool
	// Match is the where= property filter (engine/filter), nil for none:
	// the caller parses the repeated parameter.
	Match func(props []byte) bool
	// Retention: the first occurrence of CohortEvent starts a person's
	// cohort; ReturnEvent in later periods counts as a return.
	CohortEvent, ReturnEvent string
	Period                   Interval // day, week or month
	Periods                  int
	// Paths: from the first StartEvent forwards, or to the first EndEvent
	// backwards, PathSteps transitions.
	StartEvent, EndEvent string
	PathSteps            int
	// Bots counts events flagged $bot (bots=include); by default they are
	// left out and the answer says how many.
	Bots bool
}

// params that each type accepts; any other known parameter is a 400.
var accepted = map[Type][]string{
	Timeseries: {"metric", "property", "event", "visitor_id", "from", "to", "interval", "where", "bots"},
	Breakdown:  {"metric", "property", "event", "visitor_id", "from", "to", "group_by", "limit", "where", "bots"},
	Funnel:     {"steps", "funnel_id", "window", "visitor_id", "from", "to", "bots", "where"},
	Goals:      {"from", "to"},
	Retention:  {"cohort_event", "return_event", "period", "periods", "from", "to", "bots", "where"},
	Paths:      {"start_event", "end_event", "steps", "limit", "from", "to", "bots", "where"},
	Sessions:   {"from", "to", "interval", "group_by", "limit", "bots", "where"},
}

// IsParam reports whether name is a parameter of GET /analytics (for some type).
func IsParam(name string) bool { return name == "type" || contains(known, name) }

var known = []string{"metric", "property", "event", "visitor_id", "from", "to", "interval", "group_by", "limit", "steps", "funnel_id", "window", "where",
	"cohort_event", "return_event", "period", "periods", "start_event", "end_event", "bots"}

// Parse reads the parameters of GET /analytics. arg returns a query
// parameter and whether it is present; now is the current Unix ms. Every
// problem is reported in details under the parameter's name; parameters it
// does not know are the caller's to refuse (IsParam).
func Parse(arg func(name string) (string, bool), now int64) (Query, map[string]string) {
	q := Query{Limit: DefaultLimit, Interval: Day, Window: DefaultWindow}
	d := map[string]string{}
	if v, ok := arg("type"); ok {
		t := -1
		for i, n := range typeNames {
			if n == v {
				t = i
			}
		}
		if t < 0 {
			d["type"] = "must be one of timeseries, breakdown, funnel, goals, retention, paths, sessions"
			return q, d // which other parameters apply is unknown
		}
		q.Type = Type(t)
	}
	for _, name := range known {
		if _, ok := arg(name); ok && !contains(accepted[q.Type], name) {
			d[name] = "not used with type=" + q.Type.String()
		}
	}

	if v, ok := arg("metric"); ok && d["metric"] == "" {
		m := -1
		for i, n := range metricNames {
			if n == v {
				m = i
			}
		}
		if m < 0 {
			d["metric"] = "must be one of count, unique_visitors, sum, avg"
		} else {
			q.Metric = Metric(m)
		}
	}
	if v, ok := arg("bots"); ok && d["bots"] == "" {
		switch v {
		case "include":
			q.Bots = true
		case "exclude":
		default:
			d["bots"] = "must be include or exclude"
		}
	}
	if v, ok := arg("property"); ok && d["property"] == "" {
		switch {
		case v == "" || len(v) > MaxPropertyLen:
			d["property"] = "must be a property name of 1-128 bytes"
		case q.Metric != Sum && q.Metric != Avg && d["metric"] == "":
			d["property"] = "only used with metric=sum or metric=avg"
		}
		q.Property = v
	} else if !ok && (q.Metric == Sum || q.Metric == Avg) {
		d["property"] = "required when metric is sum or avg"
	}
	if v, ok := arg("event"); ok && d["event"] == "" {
		if !ValidName(v) {
			d["event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
		}
		q.Event = v
	}
	if v, ok := arg("visitor_id"); ok && d["visitor_id"] == "" {
		if !event.ValidVisitorID(v) {
			d["visitor_id"] = event.MsgVisitorID
		}
		q.VisitorID, q.HasVisitor = v, true
	}

	q.To = now
	var fromSet bool
	if v, ok := arg("from"); ok && d["from"] == "" {
		ms, _, err := event.ParseTime(v)
		if err != nil {
			d["from"] = "must be an ISO 8601 date or timestamp"
		}
		q.From, fromSet = ms, true
	}
	if v, ok := arg("to"); ok && d["to"] == "" {
		ms, dateOnly, err := event.ParseTime(v)
		if err != nil {
			d["to"] = "must be an ISO 8601 date or timestamp"
		} else if dateOnly {
			ms += dayMs - 1 // a date-only "to" means the end of that day
		}
		q.To = ms
	}
	if !fromSet {
		q.From = max(q.To-DefaultRangeMs, 0)
	}
	if d["from"] == "" && d["to"] == "" {
		switch {
		case q.From > q.To && !fromSet:
			q.From = q.To // only "to" given, before the epoch week: a single instant
		case q.From > q.To:
			d["from"] = "must not be after to"
		}
	}

	if v, ok := arg("interval"); ok && d["interval"] == "" {
		iv, ok := ParseInterval(v)
		if !ok {
			d["interval"] = "must be one of minute, hour, day, week, month"
		}
		q.Interval = iv
	}
	if (q.Type == Timeseries || q.Type == Sessions) && d["interval"] == "" && d["from"] == "" && d["to"] == "" &&
		q.Interval.count(q.From, q.To) > MaxBuckets {
		d["interval"] = "the range holds more than " + strconv.Itoa(MaxBuckets) + " " + q.Interval.String() + " buckets; choose a longer interval or a shorter range"
	}

	if v, ok := arg("group_by"); ok && d["group_by"] == "" && q.Type == Sessions {
		if v != "entry_page" && v != "exit_page" {
			d["group_by"] = "must be entry_page or exit_page with type=sessions"
		}
		q.GroupBy = v
	} else if ok && d["group_by"] == "" {
		name, isProp := strings.CutPrefix(v, "properties.")
		switch {
		case v == "event":
		case isProp && name != "" && len(name) <= MaxPropertyLen:
			q.GroupProperty = name
		default:
			d["group_by"] = "must be event or properties.<name>"
		}
		q.GroupBy = v
	} else if !ok && q.Type == Breakdown {
		d["group_by"] = "required with type=breakdown: event or properties.<name>"
	}
	if v, ok := arg("limit"); ok && d["limit"] == "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			d["limit"] = "must be an integer from 1 to 100"
		}
		q.Limit = n
	}

	steps, hasSteps := arg("steps")
	funnelID, hasFunnel := arg("funnel_id")
	if hasSteps && d["steps"] == "" && q.Type != Paths {
		q.Steps = strings.Split(steps, ",")
		switch {
		case hasFunnel:
			d["steps"] = "give either steps or funnel_id, not both"
		case len(q.Steps) < MinSteps || len(q.Steps) > MaxSteps:
			d["steps"] = "must list 2 to 10 event names"
		default:
			for _, s := range q.Steps {
				if !ValidName(s) {
					d["steps"] = "each step must be an event name: alphanumeric with underscores only (1-128 characters)"
				}
			}
		}
	}
	if hasFunnel && d["funnel_id"] == "" {
		if funnelID == "" {
			d["funnel_id"] = "must be the id of a saved funnel"
		}
		q.FunnelID = funnelID
	}
	if q.Type == Funnel && !hasSteps && !hasFunnel {
		d["steps"] = "required with type=funnel (or funnel_id)"
	}
	if v, ok := arg("window"); ok && d["window"] == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxWindow {
			d["window"] = "must be an integer number of seconds from 1 to 31536000"
		}
		q.Window, q.WindowSet = n, true
	}
	switch q.Type {
	case Retention:
		parseRetention(arg, &q, d)
	case Paths:
		parsePaths(arg, &q, d)
	}
	if len(d) == 0 {
		d = nil
	}
	return q, d
}

// parseRetention reads cohort_event (required), return_event (default: the
// cohort event), period (day, week or month; default day) and periods
// (1-12; default 8).
func parseRetention(arg func(name string) (string, bool), q *Query, d map[string]string) {
	q.Period, q.Periods = Day, DefaultPeriods
	v, ok := arg("cohort_event")
	switch {
	case !ok:
		d["cohort_event"] = "required with type=retention"
	case !ValidName(v):
		d["cohort_event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
	}
	q.CohortEvent, q.ReturnEvent = v, v
	if v, ok := arg("return_event"); ok {
		if !ValidName(v) {
			d["return_event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
		}
		q.ReturnEvent = v
	}
	if v, ok := arg("period"); ok {
		iv, ok := ParseInterval(v)
		if !ok || (iv != Day && iv != Week && iv != Month) {
			d["period"] = "must be one of day, week, month"
		}
		q.Period = iv
	}
	if v, ok := arg("periods"); ok {
		n, ok := parsePeriods(v)
		if !ok {
			d["periods"] = "must be an integer from 1 to 12"
		}
		q.Periods = n
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ValidName reports whether s is an event name: 1-128 of [A-Za-z0-9_].
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > event.MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// parsePaths reads start_event or end_event (exactly one) and steps (1-5,
// default 3; for paths a number, not the funnel's list of names).
func parsePaths(arg func(name string) (string, bool), q *Query, d map[string]string) {
	start, hasStart := arg("start_event")
	end, hasEnd := arg("end_event")
	switch {
	case hasStart == hasEnd:
		d["start_event"] = "give either start_event or end_event with type=paths"
	case hasStart && !ValidName(start):
		d["start_event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
	case hasEnd && !ValidName(end):
		d["end_event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
	}
	q.StartEvent, q.EndEvent, q.PathSteps = start, end, DefaultPathSteps
	if v, ok := arg("steps"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPathSteps {
			d["steps"] = "must be an integer from 1 to 5 with type=paths"
		}
		q.PathSteps = n
	}
}

// Params lists every parameter name of GET /analytics (for some type), for
// the documentation's checks.
func Params() []string { return append([]string{"type"}, known...) }
