// Package analytics holds the pure parts of GET /analytics and of goals:
// parameter parsing, UTC bucket alignment, the funnel and sequence
// algorithm, goal definitions and their matching. It does no I/O, so every
// rule here is covered by table tests; the engine runs the queries against
// storage and the goals actor evaluates goals with it.
package analytics

import (
	"errors"
	"time"
)

// Interval is the bucket width of a timeseries.
type Interval uint8

// Intervals of a timeseries, all aligned in UTC.
const (
	Minute Interval = iota
	Hour
	Day
	Week // starts on Monday 00:00 UTC (ISO 8601 weeks)
	Month
)

var intervalNames = [...]string{"minute", "hour", "day", "week", "month"}

// String is the interval's name as the API spells it.
func (iv Interval) String() string { return intervalNames[iv] }

// ParseInterval reads an interval name.
func ParseInterval(s string) (Interval, bool) {
	for i, n := range intervalNames {
		if n == s {
			return Interval(i), true
		}
	}
	return 0, false
}

const (
	minuteMs = int64(60_000)
	hourMs   = 60 * minuteMs
	dayMs    = 24 * hourMs
	weekMs   = 7 * dayMs
	// mondayOffset shifts Unix time so weeks start on Monday: 1970-01-01 was a Thursday.
	mondayOffset = 3 * dayMs
)

// Floor is the start of the bucket holding ms (ms >= 0).
func (iv Interval) Floor(ms int64) int64 {
	switch iv {
	case Minute:
		return ms - ms%minuteMs
	case Hour:
		return ms - ms%hourMs
	case Day:
		return ms - ms%dayMs
	case Week:
		return ms - (ms+mondayOffset)%weekMs
	default:
		t := time.UnixMilli(ms).UTC()
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	}
}

// Next is the start of the bucket after the one starting at start.
func (iv Interval) Next(start int64) int64 {
	switch iv {
	case Minute:
		return start + minuteMs
	case Hour:
		return start + hourMs
	case Day:
		return start + dayMs
	case Week:
		return start + weekMs
	default:
		t := time.UnixMilli(start).UTC()
		return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	}
}

// count is the number of buckets between the bucket of from and that of to.
func (iv Interval) count(from, to int64) int64 {
	a, b := iv.Floor(from), iv.Floor(to)
	switch iv {
	case Minute:
		return (b-a)/minuteMs + 1
	case Hour:
		return (b-a)/hourMs + 1
	case Day:
		return (b-a)/dayMs + 1
	case Week:
		return (b-a)/weekMs + 1
	default:
		ta, tb := time.UnixMilli(a).UTC(), time.UnixMilli(b).UTC()
		return int64(tb.Year()-ta.Year())*12 + int64(tb.Month()-ta.Month()) + 1
	}
}

// MaxBuckets bounds a timeseries: two weeks of minutes, or 28 years of days.
const MaxBuckets = 20_160

// ErrTooManyBuckets refuses a range too long for its interval.
var ErrTooManyBuckets = errors.New("analytics: too many buckets")

// Buckets splits the inclusive range [from, to] into the buckets of iv.
// starts are the aligned bucket starts reported to the user (the first may
// lie before from); bounds are what each bucket covers within the range,
// bucket i being [bounds[i], bounds[i+1]), so the first and last buckets
// are partial when from or to are not aligned.
func Buckets(from, to int64, iv Interval) (starts, bounds []int64, err error) {
	if from > to {
		return nil, nil, errors.New("analytics: from after to")
	}
	if iv.count(from, to) > MaxBuckets {
		return nil, nil, ErrTooManyBuckets
	}
	for s := iv.Floor(from); s <= to; s = iv.Next(s) {
		starts = append(starts, s)
		bounds = append(bounds, max(s, from))
	}
	bounds = append(bounds, to+1)
	return starts, bounds, nil
}
