// Package filter holds the property filters of GET /events, GET /analytics
// and the stream: `where=<property>:<op>:<value>`, repeatable and ANDed
// (contract section 13). It parses the parameter and matches an event's
// stored properties (compact JSON) without decoding them into maps, since a
// filtered query runs it over every event it scans.
package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/eventd/eventd/engine/event"
)

// Op is a comparison of a where condition.
type Op uint8

// The operators of the contract.
const (
	Eq Op = iota + 1
	Neq
	In
	Contains
	Gt
	Gte
	Lt
	Lte
	Exists
)

var opNames = map[string]Op{"eq": Eq, "neq": Neq, "in": In, "contains": Contains,
	"gt": Gt, "gte": Gte, "lt": Lt, "lte": Lte, "exists": Exists}

// Limits of a condition, so a hostile query costs bounded work per event.
const (
	MaxConditions = 10  // where= parameters per request
	MaxPathDepth  = 8   // dotted segments of a property path
	MaxValueLen   = 256 // bytes of a condition's value
	MaxInValues   = 50  // values of an in condition
)

// Cond is one where= condition.
type Cond struct {
	Path   []string // property path: ["context", "page", "path"]
	Op     Op
	Values []string  // the value, or an in condition's values
	nums   []float64 // Values as numbers, where they parse as one
	isNum  []bool
}

// Filter is a set of conditions that must all hold.
type Filter []Cond

// Parse reads one where= value, "<property>:<op>:<value>" (the value may
// itself contain ':'; exists takes none). The error says what is wrong, for
// the 400's details.
func Parse(s string) (Cond, error) {
	path, rest, ok := strings.Cut(s, ":")
	if !ok || path == "" {
		return Cond{}, errors.New("must be <property>:<op>:<value>")
	}
	opName, value, hasValue := strings.Cut(rest, ":")
	op, known := opNames[opName]
	if !known {
		return Cond{}, errors.New("operator must be one of eq, neq, in, contains, gt, gte, lt, lte, exists")
	}
	c := Cond{Op: op, Path: strings.Split(path, ".")}
	if len(c.Path) > MaxPathDepth {
		return Cond{}, errors.New("property path must have at most 8 segments")
	}
	for _, seg := range c.Path {
		if seg == "" {
			return Cond{}, errors.New("property path must not have empty segments")
		}
	}
	if op == Exists {
		if hasValue {
			return Cond{}, errors.New("exists takes no value")
		}
		return c, nil
	}
	if !hasValue {
		return Cond{}, errors.New("must be <property>:<op>:<value>")
	}
	if len(value) > MaxValueLen {
		return Cond{}, errors.New("value must be at most 256 bytes")
	}
	c.Values = []string{value}
	if op == In {
		c.Values = strings.Split(value, "|")
		if len(c.Values) > MaxInValues {
			return Cond{}, errors.New("in takes at most 50 values")
		}
	}
	c.nums = make([]float64, len(c.Values))
	c.isNum = make([]bool, len(c.Values))
	for i, v := range c.Values {
		if n, err := strconv.ParseFloat(v, 64); err == nil && v != "" {
			c.nums[i], c.isNum[i] = n, true
		}
	}
	return c, nil
}

// Match reports whether the properties (a compact JSON object) satisfy
// every condition.
func (f Filter) Match(props []byte) bool {
	for i := range f {
		if !f[i].Match(props) {
			return false
		}
	}
	return true
}

// Match reports whether the properties satisfy the condition. A missing
// property satisfies only neq (it is not equal to anything), as in PostHog.
func (c *Cond) Match(props []byte) bool {
	raw, found := find(props, c.Path)
	if c.Op == Exists {
		return found
	}
	if !found {
		return c.Op == Neq
	}
	num, isNum := number(raw)
	str := text(raw)
	switch c.Op {
	case Eq, Neq, In:
		eq := false
		for i, v := range c.Values {
			if isNum && c.isNum[i] {
				eq = num == c.nums[i]
			} else {
				eq = str == v
			}
			if eq {
				break
			}
		}
		return eq != (c.Op == Neq)
	case Contains:
		return strings.Contains(str, c.Values[0])
	}
	cmp := 0
	if isNum && c.isNum[0] {
		switch {
		case num < c.nums[0]:
			cmp = -1
		case num > c.nums[0]:
			cmp = 1
		}
	} else {
		cmp = strings.Compare(str, c.Values[0])
	}
	switch c.Op {
	case Gt:
		return cmp > 0
	case Gte:
		return cmp >= 0
	case Lt:
		return cmp < 0
	case Lte:
		return cmp <= 0
	}
	return false
}

// find follows path through nested objects.
func find(props []byte, path []string) ([]byte, bool) {
	v := props
	for _, seg := range path {
		var ok bool
		if v, ok = event.Lookup(v, seg); !ok {
			return nil, false
		}
	}
	return v, true
}

// number is raw as a number when it is a JSON number.
func number(raw []byte) (float64, bool) {
	if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	n, err := strconv.ParseFloat(string(raw), 64)
	return n, err == nil
}

// text is the string a value compares as: a string's content, any other
// value's JSON text (true, null, 12.5, {"a":1}).
func text(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return string(raw)
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return string(raw)
	}
	return s
}
