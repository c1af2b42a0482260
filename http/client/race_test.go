//go:build race

package client_test

// raceEnabled builds the server under test with the race detector when the tests run with -race,
// which also lets the build reuse the packages go test already compiled.
const raceEnabled = true
