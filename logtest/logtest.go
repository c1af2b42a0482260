// Package logtest holds what tests need to read eventd's logs: a log
// destination that eventd's goroutines write while a test reads it.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer for a slog handler, safe for concurrent writes
// and reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
