package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// accessLogConfig is --access-log and --access-log-sample.
type accessLogConfig struct {
	path   string
	sample float64
}

func (a *accessLogConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&a.path, "access-log", "", "write a JSON access log line per request to this file, or to standard output with - (default off)")
	fs.Float64Var(&a.sample, "access-log-sample", 1, "fraction of requests the access log records, 0 to 1")
}

// open returns the access log's writer (nil when off, or sampling nothing)
// and what closes it.
// The file is opened for appending, so a restart or logrotate's copytruncate
// does not lose lines; it is readable by the group, not by everyone, since
// it names key ids and paths of a tenant's traffic.
func (a *accessLogConfig) open() (io.Writer, func() error, error) {
	if a.sample < 0 || a.sample > 1 {
		return nil, nil, usageError{fmt.Errorf("--access-log-sample %v: want a fraction from 0 to 1", a.sample)}
	}
	switch {
	case a.path == "" || a.sample == 0:
		return nil, func() error { return nil }, nil
	case a.path == "-":
		return os.Stdout, func() error { return nil }, nil
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("--access-log: %w", err)
	}
	return f, f.Close, nil
}
