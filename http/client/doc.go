// Package client is the Go client of eventd's public API.
//
// One Client talks to one server with one API key and is safe for concurrent
// use. Writes come in two flavours:
//
//   - Track and TrackBatch send now and return the server's answer.
//   - Enqueue hands an event to a background batcher (a bounded queue, flushed
//     every FlushInterval, at BatchSize events, by Flush and by Close) and never
//     blocks: a full queue returns ErrQueueFull.
//
// Every write carries an idempotency key (the Idempotency-Key header for one
// event, idempotency_key per batch entry), generated when the Event has none,
// so the client retries any failure that may not have been stored (network
// errors, 429, 5xx) without ever storing an event twice. Retries back off
// exponentially with jitter and never come sooner than the server's
// Retry-After.
//
// Failures are *Error values carrying the HTTP status and the body's error
// code, message and details; errors.Is(err, ErrNotFound) and friends match on
// the code.
//
// Reads: Get, List, All (an iterator over every page), Verify, RateLimit and
// Analytics. Stream delivers the live feed of /stream on a channel and
// reconnects by itself, resuming after the last event it delivered, so a
// dropped connection loses nothing and repeats nothing.
package client
