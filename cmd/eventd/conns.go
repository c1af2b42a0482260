package main

import (
	"flag"
	"log/slog"
	"net"

	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/http/netguard"
)

// Connection cap defaults (contract section 11).
const (
	// maxConnsCeiling bounds the default --max-conns however high the descriptor limit.
	maxConnsCeiling = 100_000
	// defaultMaxConnsPerIP is the default --max-conns-per-ip.
	defaultMaxConnsPerIP = 4096
)

// connConfig holds the connection flags of serve.
type connConfig struct {
	maxConns, maxConnsPerIP int
}

// register adds --max-conns and --max-conns-per-ip to fs.
func (c *connConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&c.maxConns, "max-conns", 0, "connections open at once per listener; over it a new connection is closed at once (0: a quarter of the descriptor limit, at most 100000)")
	fs.IntVar(&c.maxConnsPerIP, "max-conns-per-ip", defaultMaxConnsPerIP, "connections open at once from one client IP per listener; over it a new connection is closed at once (0: no per-IP cap)")
}

// setup raises the descriptor limit and fills in the default cap; call it
// before anything opens files.
func (c *connConfig) setup(log *slog.Logger) {
	limit := raiseFileLimit(log)
	if c.maxConns <= 0 {
		c.maxConns = defaultMaxConns(limit)
	}
	if c.maxConnsPerIP < 0 {
		c.maxConnsPerIP = 0
	}
	log.Info("connection caps", "max_conns", c.maxConns, "max_conns_per_ip", c.maxConnsPerIP)
}

// defaultMaxConns is a quarter of the descriptor limit, so that the two
// listeners together take at most half and Pebble, logs and backups always
// have descriptors left; at least 1 and at most maxConnsCeiling (also when
// the limit is unknown, 0).
func defaultMaxConns(limit uint64) int {
	n := limit / 4
	switch {
	case limit == 0:
		return maxConnsCeiling
	case n < 1:
		return 1
	case n > maxConnsCeiling:
		return maxConnsCeiling
	}
	return int(n)
}

// guard returns a wrapper of TCP listeners (name "public" or "admin") that
// survives descriptor exhaustion and applies the caps.
func (c *connConfig) guard(name string, log *slog.Logger, reg *metrics.Registry) func(net.Listener) net.Listener {
	return func(ln net.Listener) net.Listener {
		return netguard.Wrap(ln, netguard.Config{Name: name, MaxConns: c.maxConns, MaxConnsPerIP: c.maxConnsPerIP,
			Logger: log, Metrics: reg})
	}
}
