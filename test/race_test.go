//go:build race

package test

// raceEnabled builds the server under test with the race detector when the tests run with -race.
const raceEnabled = true
