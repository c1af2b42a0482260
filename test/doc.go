// Package test holds eventd's end-to-end tests: each starts the real eventd
// binary on loopback with a fresh data directory and talks to it over HTTP,
// as a user would.
package test
