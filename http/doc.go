// Package http serves eventd over fasthttp: the public API (events, verify,
// rate-limit status), the admin API, health and metrics. Handlers parse,
// authenticate and validate in the request goroutine, then make exactly one
// call into the engine, which counts the request against the key's rate
// limits and stores what there is to store.
package http
