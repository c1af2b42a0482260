package ratelimit

import (
	"strconv"
	"time"
)

// The X-RateLimit-Limit, -Remaining and -Reset values are Tightest(ws).Limit,
// .Remaining and .Reset, rendered with strconv.AppendInt by the caller. The two
// helpers below render the IETF draft (draft-ietf-httpapi-ratelimit-headers)
// structured-field headers for the same windows. Both append to dst and do not
// allocate when dst has room. Callers should omit both headers when ws is empty
// (no applicable window).

// PolicyHeader appends the RateLimit-Policy value, one list member per window, e.g.
// `"minute";q=100;w=60, "hour";q=5000;w=3600, "day";q=50000;w=86400`.
func PolicyHeader(dst []byte, ws []WindowStatus) []byte {
	for i, w := range ws {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, '"')
		dst = append(dst, w.Name...)
		dst = append(dst, `";q=`...)
		dst = strconv.AppendInt(dst, w.Limit, 10)
		dst = append(dst, ";w="...)
		dst = strconv.AppendInt(dst, w.Seconds, 10)
	}
	return dst
}

// RateLimitHeader appends the RateLimit value for w (normally Tightest(ws)), e.g.
// `"minute";r=42;t=18`, where t counts down to the same instant as X-RateLimit-Reset.
func RateLimitHeader(dst []byte, w WindowStatus, now time.Time) []byte {
	dst = append(dst, '"')
	dst = append(dst, w.Name...)
	dst = append(dst, `";r=`...)
	dst = strconv.AppendInt(dst, w.Remaining, 10)
	dst = append(dst, ";t="...)
	dst = strconv.AppendInt(dst, max(0, w.Reset-now.Unix()), 10)
	return dst
}
