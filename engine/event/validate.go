package event

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Definition is a project's custom event definition (contract section 10 shape).
type Definition struct {
	Name        string        `json:"name"`
	DisplayName string        `json:"display_name"`
	Category    string        `json:"category"`
	Properties  []PropertyDef `json:"properties"`
}

// PropertyDef is one property a Definition checks on incoming events.
type PropertyDef struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
}

// Property types of a PropertyDef; exported so the admin API and dashboard offer the same list.
const (
	TypeString   = "string"   // a JSON string
	TypeNumber   = "number"   // a JSON number
	TypeBoolean  = "boolean"  // true or false
	TypeDatetime = "datetime" // an RFC 3339 date-time string with zone, as APIs emit
	TypeURL      = "url"      // an absolute http or https URL string, the only kinds a link in the dashboard can open
)

// MaxCategoryLen bounds Definition.Category, a free label (contract section 4).
const MaxCategoryLen = 64

const (
	codeValidation = "validation_error"
	msgValidation  = "Validation failed"

	msgPositive   = "must be a positive number"
	msgFuture     = "must not be more than 1 hour in the future"
	msgIsString   = "must be a string"
	msgIsNumber   = "must be a number"
	msgIsBoolean  = "must be a boolean"
	msgIsDatetime = "must be an RFC 3339 date-time string such as 2026-01-15T10:30:00Z"
	msgIsURL      = "must be an absolute http or https URL"
)

// maxFutureMs is how far ahead of receipt a timestamp may be: client clocks
// drift, but a day-ahead event is a bug that would sit on top of every list.
const maxFutureMs = 3600 * 1000

// Check validates a definition itself before it is stored, returning field path -> message, or nil when it is fine.
func (d *Definition) Check() map[string]string {
	var details map[string]string
	if d.Name == "" {
		addDetail(&details, "name", msgRequired)
	} else if msg := checkName(d.Name); msg != "" {
		addDetail(&details, "name", msg)
	}
	if utf8.RuneCountInString(d.Category) > MaxCategoryLen {
		addDetail(&details, "category", "must be at most 64 characters")
	}
	seen := make(map[string]struct{}, len(d.Properties))
	for i, p := range d.Properties {
		path := "properties[" + strconv.Itoa(i) + "]"
		switch _, dup := seen[p.Name]; {
		case p.Name == "":
			addDetail(&details, path+".name", msgRequired)
		case dup:
			addDetail(&details, path+".name", "duplicate property name "+strconv.Quote(p.Name))
		}
		seen[p.Name] = struct{}{}
		switch p.Type {
		case TypeString, TypeNumber, TypeBoolean, TypeDatetime, TypeURL:
		default:
			addDetail(&details, path+".type", "must be one of string, number, boolean, datetime, url")
		}
	}
	return details
}

// Validate runs the 422 checks that need the decoded event, the clock and the project's definition (def may be nil); nil means valid.
// It runs after ApplySkew so the future check sees the corrected time.
func Validate(in *Input, def *Definition, nowMs int64) *Problem {
	var details map[string]string
	if v, ok := lookup(in.Properties, "amount"); ok && !positiveNumber(v) {
		addDetail(&details, "properties.amount", msgPositive)
	}
	if in.HasTimestamp && in.Timestamp-nowMs > maxFutureMs {
		addDetail(&details, "timestamp", msgFuture)
	}
	if def != nil && len(def.Properties) > 0 {
		var members map[string][]byte
		if len(in.Properties) > 0 {
			var err error
			if members, err = TopLevel(in.Properties); err != nil {
				addDetail(&details, "properties", msgObject)
			}
		}
		for _, p := range def.Properties {
			v, ok := members[p.Name]
			if !ok || string(v) == "null" {
				if p.Required {
					addDetail(&details, "properties."+p.Name, msgRequired)
				}
				continue
			}
			if msg := checkType(p.Type, v); msg != "" {
				addDetail(&details, "properties."+p.Name, msg)
			}
		}
	}
	if details == nil {
		return nil
	}
	return &Problem{Status: 422, Code: codeValidation, Message: msgValidation, Details: details}
}

// positiveNumber decides "> 0" on the JSON text itself: exact for any
// precision (1e-400 is positive, 0.000 is not) where a float64 would round.
func positiveNumber(v []byte) bool {
	if len(v) == 0 || v[0] < '0' || v[0] > '9' {
		return false // negative, or not a number at all
	}
	for _, c := range v {
		if c == 'e' || c == 'E' {
			break
		}
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

// checkType returns the message for a raw JSON value that does not match a definition type, "" if it does.
func checkType(typ string, v []byte) string {
	switch typ {
	case TypeString:
		if v[0] != '"' {
			return msgIsString
		}
	case TypeNumber:
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return msgIsNumber
		}
	case TypeBoolean:
		if s := string(v); s != "true" && s != "false" {
			return msgIsBoolean
		}
	case TypeDatetime:
		if v[0] != '"' {
			return msgIsDatetime
		}
		if t, err := parseTime(stringValue(v)); err != nil || !t.rfc3339 {
			return msgIsDatetime
		}
	case TypeURL:
		if v[0] != '"' || !absoluteHTTP(string(stringValue(v))) {
			return msgIsURL
		}
	}
	return ""
}

// stringValue unescapes a raw JSON string literal (quotes included).
func stringValue(v []byte) []byte {
	raw := v[1 : len(v)-1]
	for _, c := range raw {
		if c == '\\' {
			return appendUnescaped(nil, raw)
		}
	}
	return raw
}

func absoluteHTTP(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https")
}
