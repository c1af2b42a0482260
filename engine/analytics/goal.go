package analytics

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/eventd/eventd/engine/event"
)

// Goal kinds (contract section 10).
const (
	GoalOccurrence = "occurrence"
	GoalValue      = "value"
	GoalSequence   = "sequence"
)

// Comparison operators of value goals and where conditions.
var ops = []string{"gt", "gte", "lt", "lte", "eq"}

// Where is an occurrence goal's optional condition on a property.
type Where struct {
	Property string          `json:"property"`
	Op       string          `json:"op"`
	Value    json.RawMessage `json:"value"`
}

// GoalSpec is a goal as the admin API takes it; fields that its type does not use must be absent.
type GoalSpec struct {
	Name        string   `json:"name"`
	Environment string   `json:"environment"`
	Type        string   `json:"type"`
	Event       string   `json:"event,omitempty"`
	Where       *Where   `json:"where,omitempty"`
	Property    string   `json:"property,omitempty"`
	Op          string   `json:"op,omitempty"`
	Threshold   *float64 `json:"threshold,omitempty"`
	Steps       []string `json:"steps,omitempty"`
	Window      *int64   `json:"window,omitempty"` // seconds
}

// Check validates a goal; the map names each bad field.
func (g *GoalSpec) Check() map[string]string {
	d := map[string]string{}
	if n := utf8.RuneCountInString(g.Name); n < 1 || n > 128 {
		d["name"] = "must be 1-128 characters"
	}
	if g.Environment != "live" && g.Environment != "test" {
		d["environment"] = "must be live or test"
	}
	unused := func(field string, set bool) {
		if set {
			d[field] = "not used by " + g.Type + " goals"
		}
	}
	switch g.Type {
	case GoalOccurrence:
		checkEvent(d, g.Event)
		if w := g.Where; w != nil {
			if w.Property == "" || len(w.Property) > MaxPropertyLen {
				d["where.property"] = "must be a property name of 1-128 bytes"
			}
			if !contains(ops, w.Op) {
				d["where.op"] = "must be one of gt, gte, lt, lte, eq"
			}
			switch kind, _ := scalar(w.Value); {
			case kind == 0:
				d["where.value"] = "must be a string, number or boolean"
			case w.Op != "eq" && kind != 'n':
				d["where.value"] = "must be a number with op " + w.Op
			}
		}
		unused("property", g.Property != "")
		unused("op", g.Op != "")
		unused("threshold", g.Threshold != nil)
		unused("steps", g.Steps != nil)
		unused("window", g.Window != nil)
	case GoalValue:
		checkEvent(d, g.Event)
		if g.Property == "" || len(g.Property) > MaxPropertyLen {
			d["property"] = "must be a property name of 1-128 bytes"
		}
		if !contains(ops, g.Op) {
			d["op"] = "must be one of gt, gte, lt, lte, eq"
		}
		if g.Threshold == nil {
			d["threshold"] = "is required (a number)"
		}
		unused("where", g.Where != nil)
		unused("steps", g.Steps != nil)
		unused("window", g.Window != nil)
	case GoalSequence:
		checkSteps(d, g.Steps)
		if g.Window == nil || *g.Window < 1 || *g.Window > MaxWindow {
			d["window"] = "must be an integer number of seconds from 1 to 31536000"
		}
		unused("event", g.Event != "")
		unused("where", g.Where != nil)
		unused("property", g.Property != "")
		unused("op", g.Op != "")
		unused("threshold", g.Threshold != nil)
	default:
		d["type"] = "must be one of occurrence, value, sequence"
	}
	if len(d) == 0 {
		return nil
	}
	return d
}

func checkEvent(d map[string]string, name string) {
	if !ValidName(name) {
		d["event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
	}
}

func checkSteps(d map[string]string, steps []string) {
	if len(steps) < MinSteps || len(steps) > MaxSteps {
		d["steps"] = "must list 2 to 10 event names"
		return
	}
	for _, s := range steps {
		if !ValidName(s) {
			d["steps"] = "each step must be an event name: alphanumeric with underscores only (1-128 characters)"
		}
	}
}

// FunnelSpec is a saved funnel as the admin API takes it.
type FunnelSpec struct {
	Name   string   `json:"name"`
	Steps  []string `json:"steps"`
	Window *int64   `json:"window,omitempty"` // seconds, default 86400
}

// Check validates a funnel and fills the default window.
func (f *FunnelSpec) Check() map[string]string {
	d := map[string]string{}
	if n := utf8.RuneCountInString(f.Name); n < 1 || n > 128 {
		d["name"] = "must be 1-128 characters"
	}
	checkSteps(d, f.Steps)
	if f.Window == nil {
		w := int64(DefaultWindow)
		f.Window = &w
	} else if *f.Window < 1 || *f.Window > MaxWindow {
		d["window"] = "must be an integer number of seconds from 1 to 31536000"
	}
	if len(d) == 0 {
		return nil
	}
	return d
}

// scalar classifies a JSON value: 's' string, 'n' number, 'b' boolean, 0 anything else.
func scalar(raw []byte) (kind byte, v any) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0, nil
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, nil
		}
		return 's', s
	case c == 't' || c == 'f':
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return 0, nil
		}
		return 'b', b
	case c == '-' || c >= '0' && c <= '9':
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) {
			return 0, nil
		}
		return 'n', f
	}
	return 0, nil
}

// Goal is a goal ready to evaluate against events.
type Goal struct {
	ID   string
	Spec GoalSpec
	// Since is when the goal was created (Unix ms): an event received
	// before it never completes the goal, even if it is evaluated later (a
	// catch-up after a restart, or a commit still on its way when the goal
	// was created), so a new goal counts from its creation on.
	Since int64
	// compiled forms
	windowMs  int64
	whereKind byte
	whereVal  any
	threshold float64
}

// Compile prepares a checked spec for evaluation.
func Compile(id string, spec GoalSpec) *Goal {
	g := &Goal{ID: id, Spec: spec}
	if spec.Window != nil {
		g.windowMs = *spec.Window * 1000
	}
	if spec.Where != nil {
		g.whereKind, g.whereVal = scalar(spec.Where.Value)
	}
	if spec.Threshold != nil {
		g.threshold = *spec.Threshold
	}
	return g
}

// Sequence reports whether the goal is a sequence of steps.
func (g *Goal) Sequence() bool { return g.Spec.Type == GoalSequence }

// WindowMs is a sequence goal's window.
func (g *Goal) WindowMs() int64 { return g.windowMs }

// Steps are a sequence goal's event names, in order.
func (g *Goal) Steps() []string { return g.Spec.Steps }

// HasStep reports whether name is one of a sequence goal's steps.
func (g *Goal) HasStep(name string) bool { return contains(g.Spec.Steps, name) }

// Matches reports whether one event completes an occurrence or value goal.
func (g *Goal) Matches(name string, props []byte) bool {
	if g.Spec.Event != name {
		return false
	}
	switch g.Spec.Type {
	case GoalOccurrence:
		w := g.Spec.Where
		if w == nil {
			return true
		}
		raw, ok := member(props, w.Property)
		if !ok {
			return false
		}
		kind, v := scalar(raw)
		if kind != g.whereKind {
			return false
		}
		switch kind {
		case 'n':
			return compare(v.(float64), w.Op, g.whereVal.(float64))
		case 's':
			return w.Op == "eq" && v.(string) == g.whereVal.(string)
		case 'b':
			return w.Op == "eq" && v.(bool) == g.whereVal.(bool)
		}
		return false
	case GoalValue:
		raw, ok := member(props, g.Spec.Property)
		if !ok {
			return false
		}
		kind, v := scalar(raw)
		return kind == 'n' && compare(v.(float64), g.Spec.Op, g.threshold)
	}
	return false
}

func member(props []byte, name string) ([]byte, bool) {
	m, err := event.TopLevel(props)
	if err != nil {
		return nil, false
	}
	v, ok := m[name]
	return v, ok
}

func compare(x float64, op string, y float64) bool {
	switch op {
	case "gt":
		return x > y
	case "gte":
		return x >= y
	case "lt":
		return x < y
	case "lte":
		return x <= y
	case "eq":
		return x == y
	}
	return false
}

// Round15 rounds to 15 significant digits, what a float64 holds exactly, so
// sums print as 59.97 rather than 59.970000000000006.
func Round15(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 15, 64), 64)
	if err != nil {
		return v
	}
	return r
}
