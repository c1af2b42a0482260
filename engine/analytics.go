package engine

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eventd/eventd/engine/analytics"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/storage"
)

// MaxScanEvents bounds the raw events one analytics query may read: a
// breakdown by property, a funnel, or a visitor filter. Past it the query
// answers 422 instead of running for seconds.
const MaxScanEvents = 1_000_000

// ParamError is an analytics parameter that is well-formed but refers to
// nothing (an unknown funnel_id): 400 with details.
type ParamError struct {
	Details map[string]string
}

// Error lists the details, for logs.
func (e *ParamError) Error() string {
	return fmt.Sprintf("invalid analytics parameters: %v", e.Details)
}

// ScanLimitError is a query that would read more than MaxScanEvents raw events: 422.
type ScanLimitError struct {
	Param   string // the parameter that asked for raw events
	Message string
}

// Error is the message shown to the user.
func (e *ScanLimitError) Error() string { return e.Message }

// TimeseriesResult is the answer to type=timeseries.
type TimeseriesResult struct {
	Type     string  `json:"type"`
	Metric   string  `json:"metric"`
	Interval string  `json:"interval"`
	From     string  `json:"from"`
	To       string  `json:"to"`
	Total    float64 `json:"total"`
	Data     []Point `json:"data"`
	// BotsExcluded is how many events flagged $bot the answer left out;
	// absent with bots=include.
	BotsExcluded *int64 `json:"bots_excluded,omitempty"`
}

// Point is one bucket of a timeseries.
type Point struct {
	Timestamp string  `json:"timestamp"`
	Value     float64 `json:"value"`
}

// BreakdownResult is the answer to type=breakdown.
type BreakdownResult struct {
	Type    string          `json:"type"`
	Metric  string          `json:"metric"`
	GroupBy string          `json:"group_by"`
	Total   float64         `json:"total"`
	Data    []analytics.Row `json:"data"`
	// BotsExcluded is how many events flagged $bot the answer left out;
	// absent with bots=include.
	BotsExcluded *int64 `json:"bots_excluded,omitempty"`
}

// FunnelResult is the answer to type=funnel.
type FunnelResult struct {
	Type   string       `json:"type"`
	Window int64        `json:"window"`
	Steps  []FunnelStep `json:"steps"`
	// BotsExcluded is how many events flagged $bot the answer left out;
	// absent with bots=include.
	BotsExcluded *int64 `json:"bots_excluded,omitempty"`
}

// FunnelStep is one step of a funnel.
type FunnelStep struct {
	Event          string  `json:"event"`
	Visitors       int64   `json:"visitors"`
	ConversionRate float64 `json:"conversion_rate"`
}

// GoalsResult is the answer to type=goals.
type GoalsResult struct {
	Type string     `json:"type"`
	Data []GoalStat `json:"data"`
}

// GoalStat is one goal's completions in the range.
type GoalStat struct {
	GoalID      string `json:"goal_id"`
	Name        string `json:"name"`
	Completions int64  `json:"completions"`
	Visitors    int64  `json:"visitors"`
}

// Analytics answers a parsed GET /analytics on p's dataset.
func (e *Engine) Analytics(p *Principal, q analytics.Query) (any, error) {
	switch q.Type {
	case analytics.Breakdown:
		return e.breakdown(p, q)
	case analytics.Funnel:
		return e.funnel(p, q)
	case analytics.Goals:
		return e.goalStats(p, q)
	case analytics.Retention:
		return e.retention(p, q)
	case analytics.Paths:
		return e.paths(p, q)
	case analytics.Sessions:
		return e.sessions(p, q)
	default:
		return e.timeseries(p, q)
	}
}

// value is an aggregate's value for a metric.
func value(m analytics.Metric, a *storage.Agg) float64 {
	switch m {
	case analytics.UniqueVisitors:
		if a.Sketch == nil {
			return 0
		}
		return float64(a.Sketch.Count())
	case analytics.Sum:
		return analytics.Round15(a.Sum)
	case analytics.Avg:
		if a.N == 0 {
			return 0
		}
		return analytics.Round15(a.Sum / float64(a.N))
	}
	return float64(a.Count)
}

func (e *Engine) aggQuery(p *Principal, q *analytics.Query, name string, bounds []int64) storage.AggQuery {
	return storage.AggQuery{Dataset: p.dataset, Name: name, Property: q.Property,
		Unique: q.Metric == analytics.UniqueVisitors, Bounds: bounds,
		VisitorID: q.VisitorID, HasVisitor: q.HasVisitor, MaxScan: MaxScanEvents, Match: q.Match, Bots: q.Bots}
}

// botsExcluded is the bots_excluded of an answer: n when bots were left
// out, absent (nil) when they were counted.
func botsExcluded(q *analytics.Query, n int64) *int64 {
	if q.Bots {
		return nil
	}
	return &n
}

// scanLimit is the 422 of a query past MaxScanEvents, naming the parameter
// that made it read raw events.
func scanLimit(q *analytics.Query) error {
	if q.Match != nil {
		return &ScanLimitError{Param: "where", Message: fmt.Sprintf(
			"A where= filter reads every event of the range, and it holds more than %d; "+
				"narrow from/to or add an event or visitor_id filter", MaxScanEvents)}
	}
	return &ScanLimitError{Param: "visitor_id", Message: fmt.Sprintf(
		"This visitor has more than %d events in the range; narrow from/to", MaxScanEvents)}
}

func (e *Engine) timeseries(p *Principal, q analytics.Query) (*TimeseriesResult, error) {
	starts, bounds, err := analytics.Buckets(q.From, q.To, q.Interval)
	if err != nil {
		return nil, &ParamError{Details: map[string]string{"interval": err.Error()}}
	}
	aggs, err := e.aggregate(p, &q, bounds)
	if err != nil {
		return nil, err
	}
	res := &TimeseriesResult{Type: "timeseries", Metric: q.Metric.String(), Interval: q.Interval.String(),
		From: msText(q.From), To: msText(q.To), Data: make([]Point, len(aggs))}
	var total storage.Agg
	for i := range aggs {
		res.Data[i] = Point{Timestamp: msText(starts[i]), Value: value(q.Metric, &aggs[i])}
		mergeAgg(&total, &aggs[i])
	}
	res.Total = value(q.Metric, &total)
	res.BotsExcluded = botsExcluded(&q, total.Bots)
	return res, nil
}

// aggregate reads the buckets of one name (or of every name) and maps a scan
// limit to its 422.
func (e *Engine) aggregate(p *Principal, q *analytics.Query, bounds []int64) ([]storage.Agg, error) {
	aggs, err := e.db.Aggregate(e.aggQuery(p, q, q.Event, bounds))
	if errors.Is(err, storage.ErrScanLimit) {
		return nil, scanLimit(q)
	}
	return aggs, err
}

// mergeAgg adds b to a: counts and sums add, visitor sketches unite.
func mergeAgg(a, b *storage.Agg) {
	a.Count += b.Count
	a.Bots += b.Bots
	a.Sum += b.Sum
	a.N += b.N
	if b.Sketch != nil {
		if a.Sketch == nil {
			a.Sketch = &storage.Sketch{}
		}
		a.Sketch.Merge(b.Sketch)
	}
}

func (e *Engine) breakdown(p *Principal, q analytics.Query) (*BreakdownResult, error) {
	res := &BreakdownResult{Type: "breakdown", Metric: q.Metric.String(), GroupBy: q.GroupBy}
	bounds := []int64{q.From, q.To + 1}
	if q.GroupProperty != "" {
		groups, total, err := e.db.GroupByProperty(storage.GroupQuery{Dataset: p.dataset, Name: q.Event,
			VisitorID: q.VisitorID, HasVisitor: q.HasVisitor, From: q.From, To: q.To,
			GroupBy: q.GroupProperty, Property: q.Property, Unique: q.Metric == analytics.UniqueVisitors,
			Persons: true, MaxScan: MaxScanEvents, Match: q.Match, Bots: q.Bots})
		if errors.Is(err, storage.ErrScanLimit) {
			return nil, &ScanLimitError{Param: "group_by", Message: fmt.Sprintf(
				"A breakdown by a property reads every event of the range, and this range holds more than %d; "+
					"narrow from/to or add an event or visitor_id filter", MaxScanEvents)}
		}
		if err != nil {
			return nil, err
		}
		rows := make([]analytics.Row, 0, len(groups))
		for k, g := range groups {
			if (q.Metric == analytics.Sum || q.Metric == analytics.Avg) && g.N == 0 {
				continue
			}
			rows = append(rows, analytics.Row{Key: k, Value: value(q.Metric, g)})
		}
		res.Data = analytics.Top(rows, q.Limit)
		res.Total = value(q.Metric, &total)
		res.BotsExcluded = botsExcluded(&q, total.Bots)
		return res, nil
	}
	names := []string{q.Event}
	if q.Event == "" {
		var err error
		if names, err = e.db.EventNames(p.dataset); err != nil {
			return nil, err
		}
	}
	rows := make([]analytics.Row, 0, len(names))
	var total storage.Agg
	for _, name := range names {
		aggs, err := e.db.Aggregate(e.aggQuery(p, &q, name, bounds))
		if errors.Is(err, storage.ErrScanLimit) {
			return nil, scanLimit(&q)
		}
		if err != nil {
			return nil, err
		}
		a := &aggs[0]
		mergeAgg(&total, a)
		if a.Count == 0 || ((q.Metric == analytics.Sum || q.Metric == analytics.Avg) && a.N == 0) {
			continue
		}
		rows = append(rows, analytics.Row{Key: name, Value: value(q.Metric, a)})
	}
	res.Data = analytics.Top(rows, q.Limit)
	res.Total = value(q.Metric, &total)
	res.BotsExcluded = botsExcluded(&q, total.Bots)
	return res, nil
}

func (e *Engine) funnel(p *Principal, q analytics.Query) (res *FunnelResult, err error) {
	recs := e.queryRecords(p)
	defer recs.close(&err)
	steps, window := q.Steps, q.Window
	if q.FunnelID != "" {
		f, err := e.funnelRecord(p.project.rec.Load().ID, q.FunnelID)
		if err != nil {
			return nil, &ParamError{Details: map[string]string{"funnel_id": "no saved funnel with this id in the key's project"}}
		}
		steps = f.Steps
		if !q.WindowSet {
			window = *f.Window
		}
	}
	// One scan per distinct step name, shared by repeated names; together
	// they read at most MaxScanEvents index entries.
	tooMany := &ScanLimitError{Param: "steps", Message: fmt.Sprintf(
		"The funnel's steps have more than %d events in the range; narrow from/to", MaxScanEvents)}
	byName := map[string]map[string][]analytics.Occ{}
	scanned := 0
	var bots int64
	for _, name := range steps {
		if byName[name] != nil {
			continue
		}
		if scanned >= MaxScanEvents {
			return nil, tooMany
		}
		occs := map[string][]analytics.Occ{}
		n, err := e.db.StepOccurrences(p.dataset, name, q.VisitorID, q.HasVisitor, q.From, q.To, MaxScanEvents-scanned,
			func(o storage.Occurrence) {
				if !recs.matches(&q, o.Timestamp, o.ID) {
					return
				}
				if o.Bot && !q.Bots {
					bots++
					return
				}
				occs[o.Visitor] = append(occs[o.Visitor], analytics.Occ{TS: o.Timestamp, ID: o.ID})
			})
		scanned += n
		if errors.Is(err, storage.ErrScanLimit) {
			return nil, tooMany
		}
		if err != nil {
			return nil, err
		}
		byName[name] = occs
	}
	// Linked ids (identify, alias) are one person: their occurrences
	// merge, so a visitor who started anonymously and finished signed in
	// converts once (docs/analytics.md, identity).
	if err := e.byPerson(p.dataset, byName); err != nil {
		return nil, err
	}
	// Only visitors who did the first step can enter the funnel.
	byVisitor := map[string][][]analytics.Occ{}
	for v := range byName[steps[0]] {
		lists := make([][]analytics.Occ, len(steps))
		for j, name := range steps {
			lists[j] = byName[name][v]
		}
		byVisitor[v] = lists
	}
	counts := analytics.FunnelCounts(byVisitor, len(steps), window*1000)
	rates := analytics.ConversionRates(counts)
	res = &FunnelResult{Type: "funnel", Window: window, Steps: make([]FunnelStep, len(steps)), BotsExcluded: botsExcluded(&q, bots)}
	for i, name := range steps {
		res.Steps[i] = FunnelStep{Event: name, Visitors: counts[i], ConversionRate: rates[i]}
	}
	return res, nil
}

// byPerson regroups each step's occurrences by person, with the links
// stored now; nothing changes when the dataset has no link.
func (e *Engine) byPerson(ds uint32, byName map[string]map[string][]analytics.Occ) error {
	r, err := e.db.NewResolver(ds)
	if err != nil {
		return err
	}
	defer r.Close()
	if !r.HasLinks() {
		return nil
	}
	for name, occs := range byName {
		merged := make(map[string][]analytics.Occ, len(occs))
		multi := map[string]bool{}
		for v, l := range occs {
			person, err := r.Person(v)
			if err != nil {
				return err
			}
			if _, ok := merged[person]; ok {
				multi[person] = true
			}
			merged[person] = append(merged[person], l...)
		}
		for person := range multi {
			slices.SortFunc(merged[person], analytics.CompareOcc)
		}
		byName[name] = merged
	}
	return nil
}

func (e *Engine) goalStats(p *Principal, q analytics.Query) (*GoalsResult, error) {
	goals := e.principalGoals(p)
	res := &GoalsResult{Type: "goals", Data: make([]GoalStat, 0, len(goals))}
	for _, g := range goals {
		c, v, err := e.db.CountCompletions(p.dataset, g.ID, q.From, q.To)
		if err != nil {
			return nil, err
		}
		res.Data = append(res.Data, GoalStat{GoalID: g.ID, Name: g.Name, Completions: c, Visitors: v})
	}
	return res, nil
}

// RetentionResult is the answer to type=retention.
type RetentionResult struct {
	Type    string         `json:"type"`
	Period  string         `json:"period"`
	Cohorts []CohortResult `json:"cohorts"`
	// BotsExcluded is how many events flagged $bot the answer left out;
	// absent with bots=include.
	BotsExcluded *int64 `json:"bots_excluded,omitempty"`
}

// CohortResult is one row of the retention triangle.
type CohortResult struct {
	Start    string `json:"start"`
	Size     int    `json:"size"`
	Returned []int  `json:"returned"`
}

// retention reads the cohort event's occurrences in [from, to] and the
// return event's from the first cohort's period to the last period that
// can count, both from the name index (no record is read), groups linked
// ids into persons, and builds the triangle; at most MaxScanEvents index
// entries in all.
func (e *Engine) retention(p *Principal, q analytics.Query) (res *RetentionResult, err error) {
	recs := e.queryRecords(p)
	defer recs.close(&err)
	now := time.Now().UnixMilli()
	end := q.Period.Floor(q.To)
	for range q.Periods {
		end = q.Period.Next(end)
	}
	end = min(end-1, now)
	byName := map[string]map[string][]analytics.Occ{}
	scanned := 0
	// A bot event can be read twice (as cohort and as return event): count it once.
	bots := map[storage.ID]bool{}
	scan := func(key, name string, from, to int64) error {
		occs := byName[key]
		if occs == nil {
			occs = map[string][]analytics.Occ{}
			byName[key] = occs
		}
		n, err := e.db.StepOccurrences(p.dataset, name, "", false, from, to, MaxScanEvents-scanned, func(o storage.Occurrence) {
			if !recs.matches(&q, o.Timestamp, o.ID) {
				return
			}
			if o.Bot && !q.Bots {
				bots[o.ID] = true
				return
			}
			occs[o.Visitor] = append(occs[o.Visitor], analytics.Occ{TS: o.Timestamp, ID: o.ID})
		})
		scanned += n
		if errors.Is(err, storage.ErrScanLimit) || scanned > MaxScanEvents {
			return &ScanLimitError{Param: "cohort_event", Message: fmt.Sprintf(
				"The cohort and return events have more than %d occurrences in the range; narrow from/to", MaxScanEvents)}
		}
		return err
	}
	if err := scan("cohort", q.CohortEvent, q.From, q.To); err != nil {
		return nil, err
	}
	if err := scan("return", q.ReturnEvent, q.Period.Floor(q.From), end); err != nil {
		return nil, err
	}
	if err := e.byPerson(p.dataset, byName); err != nil {
		return nil, err
	}
	firsts := make(map[string]int64, len(byName["cohort"]))
	for person, occs := range byName["cohort"] {
		first := occs[0].TS
		for _, o := range occs[1:] {
			first = min(first, o.TS)
		}
		firsts[person] = first
	}
	returns := make(map[string][]int64, len(byName["return"]))
	for person, occs := range byName["return"] {
		if _, ok := firsts[person]; !ok {
			continue
		}
		for _, o := range occs {
			returns[person] = append(returns[person], o.TS)
		}
	}
	res = &RetentionResult{Type: "retention", Period: q.Period.String(), Cohorts: []CohortResult{}, BotsExcluded: botsExcluded(&q, int64(len(bots)))}
	for _, c := range analytics.RetentionCohorts(firsts, returns, q.Period, q.Periods, now) {
		res.Cohorts = append(res.Cohorts, CohortResult{Start: msText(c.Start), Size: c.Size, Returned: c.Returned})
	}
	return res, nil
}

// PathsResult is the answer to type=paths.
type PathsResult struct {
	Type        string                 `json:"type"`
	StartEvent  string                 `json:"start_event,omitempty"`
	EndEvent    string                 `json:"end_event,omitempty"`
	Steps       int                    `json:"steps"`
	Transitions []analytics.Transition `json:"transitions"`
	// BotsExcluded is how many events flagged $bot the answer left out;
	// absent with bots=include.
	BotsExcluded *int64 `json:"bots_excluded,omitempty"`
}

// paths finds the visitors who did the start (or end) event in [from, to]
// from its name index, reads each one's events of the range from the
// visitor index (the record too for a pageview, whose label is its page
// path), and counts the transitions; at most MaxScanEvents index entries.
func (e *Engine) paths(p *Principal, q analytics.Query) (res *PathsResult, err error) {
	recs := e.queryRecords(p)
	defer recs.close(&err)
	anchor := q.StartEvent
	if anchor == "" {
		anchor = q.EndEvent
	}
	tooMany := &ScanLimitError{Param: "from", Message: fmt.Sprintf(
		"The visitors of this path have more than %d events in the range; narrow from/to", MaxScanEvents)}
	visitors := map[string]bool{}
	var bots int64
	scanned, err := e.db.StepOccurrences(p.dataset, anchor, "", false, q.From, q.To, MaxScanEvents, func(o storage.Occurrence) {
		if !recs.matches(&q, o.Timestamp, o.ID) {
			return
		}
		if o.Bot && !q.Bots {
			bots++
			return
		}
		visitors[o.Visitor] = true
	})
	if errors.Is(err, storage.ErrScanLimit) {
		return nil, tooMany
	}
	if err != nil {
		return nil, err
	}
	if scanned >= MaxScanEvents && len(visitors) > 0 {
		return nil, tooMany // a limit of 0 below would mean none
	}
	histories, err := e.db.VisitorsEvents(p.dataset, slices.Collect(maps.Keys(visitors)), q.From, q.To, MaxScanEvents-scanned)
	if errors.Is(err, storage.ErrScanLimit) {
		return nil, tooMany
	}
	if err != nil {
		return nil, err
	}
	seqs := make([][]analytics.PathNode, 0, len(visitors))
	for _, evs := range histories {
		seq := make([]analytics.PathNode, 0, len(evs))
		for _, ev := range evs {
			if !recs.matches(&q, ev.Timestamp, ev.ID) {
				continue
			}
			// A visitor's own bot events (one who also browsed) are left
			// out of the path and counted like the anchor's.
			if ev.Bot && !q.Bots {
				if ev.Name != anchor {
					bots++
				}
				continue
			}
			n := analytics.PathNode{Name: ev.Name, Label: ev.Name}
			if ev.Name == "pageview" {
				n.Label = recs.pagePath(ev.Timestamp, ev.ID)
			}
			seq = append(seq, n)
		}
		seqs = append(seqs, seq)
	}
	return &PathsResult{Type: "paths", StartEvent: q.StartEvent, EndEvent: q.EndEvent, Steps: q.PathSteps,
		Transitions:  analytics.PathTransitions(seqs, q.StartEvent, q.EndEvent, q.PathSteps, q.Limit),
		BotsExcluded: botsExcluded(&q, bots)}, nil
}

// queryRecords reads the records a funnel, retention or paths query needs
// (where= filters, page paths) through one storage.RecordReader, opened at
// the first read: most of these queries read none.
type queryRecords struct {
	db  *storage.DB
	ds  uint32
	rr  *storage.RecordReader
	err error // the first read error but "not found": the query fails with it
}

func (e *Engine) queryRecords(p *Principal) *queryRecords {
	return &queryRecords{db: e.db, ds: p.dataset}
}

func (r *queryRecords) get(ts int64, id storage.ID) (storage.Event, error) {
	if r.rr == nil {
		rr, err := r.db.NewRecordReader(r.ds)
		if err != nil {
			r.err = cmp.Or(r.err, err)
			return storage.Event{}, err
		}
		r.rr = rr
	}
	ev, err := r.rr.Get(ts, id)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		r.err = cmp.Or(r.err, err)
	}
	return ev, err
}

// close releases the reader and fails the query (*err, if it has not
// failed already) with the first read error: matches and pagePath answer as
// if the record were missing, so only this reports it.
func (r *queryRecords) close(err *error) {
	if r.rr != nil {
		_ = r.rr.Close()
	}
	if *err == nil {
		*err = r.err
	}
}

// matches applies the where= filter to an event known by its index entry
// (funnels, retention, paths read no record otherwise): true without a
// filter, false for an event erased since its index entry was read.
func (r *queryRecords) matches(q *analytics.Query, ts int64, id storage.ID) bool {
	if q.Match == nil {
		return true
	}
	ev, err := r.get(ts, id)
	return err == nil && q.Match(ev.Properties)
}

// pagePath labels a pageview with its page path: the "path" property t.js
// sends, else the path of Segment's context.page; "pageview" without one.
func (r *queryRecords) pagePath(ts int64, id storage.ID) string {
	ev, err := r.get(ts, id)
	if err != nil {
		return "pageview"
	}
	return pageOf(ev.Properties)
}

// pageOf is a pageview's page path: the "path" property t.js sends, else
// Segment's context.page.path; "pageview" without one.
func pageOf(props []byte) string {
	for _, path := range [][]string{{"path"}, {"$context", "page", "path"}} {
		v := props
		ok := true
		for _, seg := range path {
			if v, ok = event.Lookup(v, seg); !ok {
				break
			}
		}
		if s, isStr := event.StringValue(v); ok && isStr && strings.HasPrefix(s, "/") {
			return s
		}
	}
	return "pageview"
}

// SessionsResult is the answer to type=sessions: per bucket, or (group_by
// entry_page or exit_page) sessions per page.
type SessionsResult struct {
	Type     string                   `json:"type"`
	Interval string                   `json:"interval,omitempty"`
	GroupBy  string                   `json:"group_by,omitempty"`
	Total    analytics.SessionStats   `json:"total"`
	Data     []analytics.SessionStats `json:"data,omitempty"`
	Rows     []analytics.Row          `json:"rows,omitempty"`
	// BotsExcluded is how many events flagged $bot the answer left out;
	// absent with bots=include.
	BotsExcluded *int64 `json:"bots_excluded,omitempty"`
}

// sessions cuts the visitors' events into sessions (a gap over the timeout
// ends one: the project's session_timeout_minutes) and counts those that
// start in [from, to]. Events up to a
// timeout before from are read too, so a session running into the range is
// not counted as a new one; at most MaxScanEvents events.
func (e *Engine) sessions(p *Principal, q analytics.Query) (*SessionsResult, error) {
	timeout := int64(p.project.rec.Load().sessionTimeout()) * 60_000
	hits := map[string][]analytics.Hit{}
	var bots int64
	err := e.db.EventsInRange(p.dataset, q.From-timeout, q.To, MaxScanEvents, func(ev *storage.Event) {
		if !ev.HasVisitor {
			return
		}
		if q.Match != nil && !q.Match(ev.Properties) {
			return
		}
		if !q.Bots && storage.IsBot(ev.Properties) {
			if ev.Timestamp >= q.From {
				bots++ // the events before from are read only to join sessions
			}
			return
		}
		h := analytics.Hit{TS: ev.Timestamp, Pageview: ev.Name == "pageview"}
		if h.Pageview {
			if h.Page = pageOf(ev.Properties); h.Page == "pageview" {
				h.Page = ""
			}
		}
		hits[ev.VisitorID] = append(hits[ev.VisitorID], h)
	})
	if errors.Is(err, storage.ErrScanLimit) {
		return nil, &ScanLimitError{Param: "from", Message: fmt.Sprintf(
			"Sessions read every event of the range, and it holds more than %d; narrow from/to", MaxScanEvents)}
	}
	if err != nil {
		return nil, err
	}
	all := analytics.SplitSessions(hits, timeout)
	in := all[:0]
	for _, s := range all {
		if s.Start >= q.From && s.Start <= q.To {
			in = append(in, s)
		}
	}
	res := &SessionsResult{Type: "sessions", Total: analytics.Stats(in), BotsExcluded: botsExcluded(&q, bots)}
	if q.GroupBy != "" {
		res.GroupBy = q.GroupBy
		counts := map[string]int{}
		for _, s := range in {
			page := s.Entry
			if q.GroupBy == "exit_page" {
				page = s.Exit
			}
			if page != "" {
				counts[page]++
			}
		}
		rows := make([]analytics.Row, 0, len(counts))
		for k, n := range counts {
			rows = append(rows, analytics.Row{Key: k, Value: float64(n)})
		}
		res.Rows = analytics.Top(rows, q.Limit)
		return res, nil
	}
	starts, bounds, err := analytics.Buckets(q.From, q.To, q.Interval)
	if err != nil {
		return nil, &ParamError{Details: map[string]string{"interval": err.Error()}}
	}
	res.Interval = q.Interval.String()
	byBucket := make([][]analytics.Session, len(starts))
	for _, s := range in {
		if i := slices.IndexFunc(bounds[1:], func(b int64) bool { return s.Start < b }); i >= 0 {
			byBucket[i] = append(byBucket[i], s)
		}
	}
	res.Data = make([]analytics.SessionStats, len(starts))
	for i := range starts {
		res.Data[i] = analytics.Stats(byBucket[i])
		res.Data[i].Timestamp = msText(starts[i])
	}
	return res, nil
}
