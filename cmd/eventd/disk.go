package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/storage"
	"github.com/eventd/eventd/storage/diskspace"
)

// sizeFlag is a byte size flag: "512MiB", "1GiB", "1073741824"; with auto,
// also the word "auto" (a default computed from the volume).
type sizeFlag struct {
	n         int64
	auto      bool
	allowAuto bool
}

func (f *sizeFlag) String() string {
	if f == nil {
		return ""
	}
	if f.auto {
		return "auto"
	}
	return diskspace.FormatSize(f.n)
}

func (f *sizeFlag) Set(s string) error {
	if f.allowAuto && s == "auto" {
		f.auto = true
		return nil
	}
	n, err := diskspace.ParseSize(s)
	if err != nil {
		return err
	}
	f.n, f.auto = n, false
	return nil
}

// diskConfig holds the free-space flags of serve.
type diskConfig struct {
	minFree sizeFlag
	ballast sizeFlag
}

func (c *diskConfig) register(fs *flag.FlagSet) {
	c.minFree = sizeFlag{auto: true, allowAuto: true}
	c.ballast = sizeFlag{n: diskspace.DefaultBallastSize}
	fs.Var(&c.minFree, "min-free-disk", "refuse writes (507) while free space on the data volume is under this size (auto: 1GiB or 5% of the volume, the smaller)")
	fs.Var(&c.ballast, "ballast-size", "size of <data>/ballast, space the operator can free by deleting it on a full disk (0: none)")
}

// minFreeBytes is the threshold for diskspace: negative means the default.
func (c *diskConfig) minFreeBytes() int64 {
	if c.minFree.auto {
		return -1
	}
	return c.minFree.n
}

// setup creates the ballast when there is room for it and returns the
// guard, already checked once: a start on a short volume refuses writes
// from the first request.
func (c *diskConfig) setup(data string, log *slog.Logger) *diskspace.Guard {
	dlog := log.With("component", "disk")
	minFree := c.minFreeBytes()
	path := filepath.Join(data, "ballast")
	switch res, err := diskspace.EnsureBallast(path, c.ballast.n, minFree, nil); {
	case err != nil:
		dlog.Warn("ballast not created", "path", path, "err", err)
	case res == diskspace.BallastCreated:
		dlog.Info("ballast created", "path", path, "bytes", c.ballast.n)
	case res == diskspace.BallastNoRoom:
		dlog.Warn("no room for the ballast: not created (free space minus it would be under --min-free-disk)",
			"path", path, "bytes", c.ballast.n)
	}
	g := diskspace.New(diskspace.Config{Dir: data, MinFree: minFree, Logger: dlog})
	g.Check()
	dlog.Info("disk guard", "dir", data, "free_bytes", g.Free(), "min_free_bytes", g.Threshold(), "ballast_bytes", c.ballast.n)
	return g
}

// storageFatalGrace lets requests whose write just failed receive their
// answer (507 on a full disk) before the process exits.
const storageFatalGrace = time.Second

// storageFatal ends the process after a fatal storage error (the error was
// already logged by the store): exit status 3, documented in operations.md,
// never a panic trace. The store refuses every write meanwhile.
func storageFatal(log *slog.Logger) func(error) {
	return func(err error) {
		time.Sleep(storageFatalGrace)
		log.Error("exiting after a storage failure; on a full disk, free space (or delete <data>/ballast) and start again",
			"err", err, "no_space", storage.NoSpace(err), "exit_code", storage.ExitFatal)
		os.Exit(storage.ExitFatal)
	}
}

// openRoom is the free space Pebble needs to open read-write: it rewrites
// its manifest, flushes the WALs it replays into sstables and starts a new
// WAL and OPTIONS file. Below it Pebble's open fails (MANIFEST write) or
// spins (it retries the WAL flush at once, forever), so eventd opens the
// store read-only instead.
func openRoom(pebbleDir string) uint64 {
	const slack = 4 << 20
	need := uint64(slack)
	entries, err := os.ReadDir(pebbleDir)
	if err != nil {
		return need
	}
	for _, e := range entries {
		name := e.Name()
		if filepath.Ext(name) != ".log" && !strings.HasPrefix(name, "MANIFEST-") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			need += uint64(fi.Size())
		}
	}
	return need
}

// readOnlyStart reports whether the store must open read-only: free space
// is under what opening read-write takes, whatever --min-free-disk says
// (even 0).
func readOnlyStart(g *diskspace.Guard, pebbleDir string, log *slog.Logger) bool {
	need := openRoom(pebbleDir)
	if !g.Known() || g.Free() >= need {
		return false
	}
	log.Warn("too little free space to open the store for writing: serving reads only; eventd restarts itself for writing once there is room (delete <data>/ballast to make some)",
		"component", "disk", "free_bytes", g.Free(), "needed_bytes", need)
	return true
}

// reopenWhenRoom is closed once a read-only start (see readOnlyStart) may
// open the store for writing: free space is back over --min-free-disk and
// over what the open takes. nil when the store is writable (a nil channel
// never fires). It stops looking when a signal is pending.
func reopenWhenRoom(cfg engine.Config, sig <-chan os.Signal) <-chan struct{} {
	if !cfg.ReadOnly || cfg.Disk == nil {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for range t.C {
			if len(sig) > 0 {
				return
			}
			// The engine's guard re-reads the volume every second.
			if !cfg.Disk.Refusing() && cfg.Disk.Free() >= openRoom(cfg.DataDir) {
				close(ch)
				return
			}
		}
	}()
	return ch
}

// reexec replaces the process with a fresh eventd with the same arguments
// and environment (same pid, so a supervisor sees no exit): the simplest
// correct way from a read-only store to a writable one, since everything
// above the store holds it. Listeners and the store are closed by then.
func reexec() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("restart for writing: %w", err)
	}
	return fmt.Errorf("restart for writing: %w", syscall.Exec(exe, os.Args, os.Environ()))
}
