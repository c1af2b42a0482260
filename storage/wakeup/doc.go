// Package wakeup wakes the Go scheduler at a set time, so that a runtime
// timer shorter than a millisecond fires on time in a process that has
// nothing else to do.
//
// An idle Go process sleeps in epoll_wait, whose timeout is in whole
// milliseconds: the runtime rounds any shorter wait up to 1 ms
// (runtime/netpoll_epoll.go). Pebble's WAL min-sync interval (300 µs in
// eventd) is a time.AfterFunc timer, so whenever every request was waiting
// for that sync (a closed loop of clients), the sync came about 1.1 ms
// after the previous one instead of 0.3 ms, with both cores idle between:
// 17% of a 2 s trace of the single scenario (docs/benchmarks.md, session
// 16). A timerfd armed for the same moment is a file the netpoller waits
// on, and it ends epoll_wait at the nanosecond; the scheduler then runs
// the timers that are due, Pebble's among them.
package wakeup
