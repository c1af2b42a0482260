// Package ratelimit holds the window arithmetic behind eventd's per-key rate
// limits: sliding minute, hour and day windows, their persistence format, the
// response-header rendering and a per-client-IP guard for public pageviews.
//
// It does no I/O and starts no goroutines; the key actor that owns a Bucket
// decides when to persist it.
package ratelimit

import "strconv"

// Limits are the per-window maxima; 0 means the window does not apply.
type Limits struct {
	Minute int64 `json:"minute"`
	Hour   int64 `json:"hour"`
	Day    int64 `json:"day"`
}

// Analytics is fixed by the spec, independent of the plan.
var Analytics = Limits{Minute: 50}

// PlanLimits returns the spec's table for plan; ok is false for a plan the spec does not name.
func PlanLimits(plan string) (lim Limits, ok bool) {
	switch plan {
	case "free":
		return Limits{Minute: 100, Hour: 5000, Day: 50000}, true
	case "professional":
		return Limits{Minute: 500, Hour: 25000, Day: 250000}, true
	case "enterprise":
		return Limits{Minute: 2000, Hour: 100000, Day: 1000000}, true
	}
	return Limits{}, false
}

// Tenth derives the batch bucket, never rounding an applicable window down to "unlimited".
func (l Limits) Tenth() Limits {
	return Limits{Minute: tenth(l.Minute), Hour: tenth(l.Hour), Day: tenth(l.Day)}
}

func tenth(v int64) int64 {
	if v <= 0 {
		return 0
	}
	return max(v/10, 1)
}

// arr lets the window loops index limits the same way they index windows.
func (l Limits) arr() [numWindows]int64 {
	return [numWindows]int64{l.Minute, l.Hour, l.Day}
}

// Kind names a bucket.
type Kind uint8

// The bucket kinds a request can be counted in.
const (
	// Standard is shared by event writes and reads, verify and stream connects.
	Standard Kind = iota
	// Batch is separate so batch uploads cannot starve single-event writes.
	Batch
	// AnalyticsKind has its own small quota because analytics queries are expensive.
	AnalyticsKind
	// None is counted nowhere (GET /rate-limit, public-key pageviews).
	None
)

// String gives the name used in logs and in the "buckets" object of GET /rate-limit.
func (k Kind) String() string {
	switch k {
	case Standard:
		return "standard"
	case Batch:
		return "batch"
	case AnalyticsKind:
		return "analytics"
	case None:
		return "none"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}
