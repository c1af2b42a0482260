// Package bench measures eventd from the outside, as a client: a load
// generator, the baselines eventd is compared with, and the report. It
// imports nothing of the server; cmd/eventd-bench drives it.
//
// # Closed and open loop
//
// A closed-loop run (ClosedLoop) keeps N connections busy, each sending its
// next request as soon as the previous answer arrives. It finds the maximum
// throughput, but its latencies flatter the server: when the server stalls,
// the client stops sending too, so the requests that would have queued behind
// the stall are never issued and never measured. That is coordinated omission.
//
// An open-loop run (OpenLoop) sends at a fixed arrival rate whatever the
// server does. A Pacer gives request i the intended send time start + i/rate
// (computed from i, so it never drifts), and latency is measured from that
// intended time, not from when a connection happened to be free: a stall
// shows up in every request that should have been sent during it, as users
// would see it. Result.Service keeps the time from the actual send, so the
// difference between the two is the queueing. Requests still unsent long
// after the run (Duration + Timeout) count as "unsent" errors with the
// latency they had accrued, rather than stretching the run forever.
//
// Latencies go into fixed-size log-linear histograms (Histogram, about 1%
// precision from 1 µs to a minute, allocation-free Record), one per worker,
// merged at the end; percentiles are computed from the merged counts, never
// averaged.
//
// # Ceilings, measured in the same run
//
// Absolute figures depend on the machine; ratios to a ceiling travel. Every
// scenario is compared with what the machine can do without eventd:
//
//   - NoopServer, a fasthttp server that reads the request and answers 201
//     with a small JSON body, is the HTTP ceiling for single events;
//   - PebbleBaseline, raw Pebble batch commits with pebble.Sync of records of
//     eventd's shape (four ~40-byte keys and a ~200-byte value per event), by
//     as many concurrent committers as the scenario has connections, is the
//     storage ceiling. PebbleOptions.FsyncDelay adds a delay to every fsync
//     (storage/vfsdelay, the same wrapper `eventd serve --fsync-delay` uses)
//     to show what group commit is worth on slower disks;
//   - FsyncNoopServer, the no-op server answering a POST only once its body
//     is fdatasynced (bodies queued meanwhile share one sync), is the
//     durability floor: what any server that syncs before its 201 does at
//     least, so eventd's single ratio cannot pass its ratio to the no-op.
//
// The ceilings run on the same machine, in the same process tree, alternating
// with eventd in short rounds (eventd, then each ceiling; then the reverse),
// so that drift (thermal throttling, other tenants, page cache, compaction
// debt) hits both sides alike. A figure is the mean over rounds, and the
// ratio is eventd's mean over the ceiling's. The load generator shares the
// machine with the server in both cases, which is why the ceilings are
// measured through the same generator.
//
// # Beyond throughput
//
//   - Subscribers (stream.go) holds WebSocket connections to /stream and
//     measures delivery: every ingested event carries its send time in
//     properties.sent_ns, and receive time minus send time is recorded per
//     message, with per-second delivery counts, close codes and
//     reconnections (since=<last id>).
//   - MemSampler (memory.go) follows the server's memory: VmRSS from
//     /proc/<pid>/status of the process the bench started (eventd's /metrics
//     has no memory gauge), the Go heap from /debug/pprof/heap?debug=1, and
//     AnalyzeMemory fits a line to a long run to say whether it is flat.
//   - WriteTable prints the terminal summary with each scenario's targets;
//     Report is bench-results.json; WriteHTML renders the same data as a
//     self-contained bench-report.html (inline SVG charts, no external
//     requests).
//
// cmd/eventd-bench holds the scenarios and runs them; docs/benchmarks.md has
// the method and the latest figures.
package bench
