package engine

import (
	"errors"

	"github.com/eventd/eventd/storage"
	"github.com/eventd/eventd/storage/diskspace"
)

// ErrInsufficientStorage refuses a write while free space on the data
// volume is under --min-free-disk, or after the store failed on a full disk.
// The HTTP layer answers 507 insufficient_storage with Retry-After: 30.
var ErrInsufficientStorage = diskspace.ErrInsufficient

// startDisk wires the free-space guard: the key actors ask it before every
// write, a goroutine re-reads the volume every second, and two gauges show
// it. Without a guard (tests, tools) writes are never refused for space.
func (e *Engine) startDisk() {
	e.keys.SetWriteGate(e.writeGate)
	e.metrics.GaugeFunc("eventd_disk_writes_refused", "1 while writes are refused for lack of free disk space (507), else 0.", "",
		func() float64 {
			if e.DiskRefusing() {
				return 1
			}
			return 0
		})
	g := e.cfg.Disk
	if g == nil {
		return
	}
	e.metrics.GaugeFunc("eventd_disk_free_bytes", "Free bytes on the data volume, as last read (every second).", "",
		func() float64 { return float64(g.Free()) })
	e.metrics.GaugeFunc("eventd_disk_min_free_bytes", "Free bytes under which writes are refused (--min-free-disk).", "",
		func() float64 { return float64(g.Threshold()) })
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		g.Run(e.stop, 0)
	}()
}

// writeGate is the check every write passes after its rate limit: one
// atomic load while all is well.
func (e *Engine) writeGate() error {
	if e.cfg.Disk.Refusing() || e.cfg.ReadOnly {
		return ErrInsufficientStorage
	}
	if err := e.db.Failed(); err != nil {
		if storage.NoSpace(err) {
			return ErrInsufficientStorage
		}
		return err
	}
	return nil
}

// DiskRefusing reports whether writes are refused for lack of space, for
// /healthz ("degraded") and the gauge.
func (e *Engine) DiskRefusing() bool {
	return errors.Is(e.writeGate(), ErrInsufficientStorage)
}

// checkDisk reads the volume now, before a large job (an import), and
// refuses it when space is short.
func (e *Engine) checkDisk() error {
	if g := e.cfg.Disk; g != nil {
		g.Check()
	}
	return e.writeGate()
}

// storageError maps a write's failure: a full disk is a 507, not a 500.
func storageError(err error) error {
	if err != nil && !errors.Is(err, ErrInsufficientStorage) && storage.NoSpace(err) {
		return ErrInsufficientStorage
	}
	return err
}
