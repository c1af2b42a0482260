package main

import (
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"time"

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
