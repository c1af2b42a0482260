// Package diskspace watches the free space of the data volume and decides
// when eventd must stop accepting events, after CockroachDB's emergency
// ballast: refuse writes while there is still room, so that the store never
// meets a full disk, and keep a ballast file the operator can delete to get
// room to recover.
package diskspace

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInsufficient is returned by every write while free space is under the threshold.
var ErrInsufficient = errors.New("insufficient storage: free disk space is under --min-free-disk")

// Usage is what statfs says about a volume, in bytes.
type Usage struct {
	Total uint64 // size of the volume
	Free  uint64 // available to an unprivileged user (f_bavail): what eventd can still write
}

// StatFunc reports the usage of the volume holding path. Stat is the real
// one; tests inject their own.
type StatFunc func(path string) (Usage, error)

// Defaults of the flags. 1 GiB leaves Pebble room for a flush and a
// compaction of a busy store; 5% keeps small volumes (a 4 GiB VM disk)
// usable. The ballast is 256 MiB: enough for eventd to start, flush its WAL
// and serve until the operator frees more.
const (
	DefaultMinFreeCap     = 1 << 30
	DefaultMinFreePercent = 5
	DefaultBallastSize    = 256 << 20
	// DefaultInterval is how often the guard looks at the volume.
	DefaultInterval = time.Second
)

// Threshold returns the free space under which writes are refused: minFree
// when it is set (>= 0), else the smaller of 1 GiB and 5% of the volume.
func Threshold(minFree int64, total uint64) uint64 {
	if minFree >= 0 {
		return uint64(minFree)
	}
	return min(uint64(DefaultMinFreeCap), total/100*DefaultMinFreePercent)
}

// size units: binary (KiB, MiB, ...) and decimal (kB, MB, ...), case-insensitive.
var units = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseSize reads a size such as "512MiB", "1GiB", "1.5GB" or "1048576"
// (bytes). Single letters (k, m, g, t) are binary like the -iB forms.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mul, ok := units[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%q is not a size (examples: 1073741824, 512MiB, 1GiB, 2GB)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (examples: 1073741824, 512MiB, 1GiB, 2GB)", s)
	}
	v := f * mul
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}

// FormatSize writes n bytes in the largest binary unit that keeps it whole, as ParseSize reads it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// Config configures a Guard.
type Config struct {
	// Dir is a directory on the watched volume (the data directory).
	Dir string
	// MinFree is the threshold in bytes; negative means the default
	// (the smaller of 1 GiB and 5% of the volume).
	MinFree int64
	// Stat reads the volume; nil means Stat (statfs).
	Stat StatFunc
	// Logger is told once per change of state.
	Logger *slog.Logger
}

// Guard knows whether free space on the data volume is under the threshold.
// The write paths read one atomic bool (Refusing); Check and Run update it.
type Guard struct {
	cfg      Config
	refusing atomic.Bool
	free     atomic.Uint64
	total    atomic.Uint64
	mu       sync.Mutex // serialises Check, so state changes are logged once
	statErr  bool       // the last statfs failed (logged once)
	checked  bool
}

// New returns a guard that has not looked at the volume yet (it accepts
// writes until the first Check).
func New(cfg Config) *Guard {
	if cfg.Stat == nil {
		cfg.Stat = Stat
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{cfg: cfg}
}

// Refusing reports whether writes must be refused: one atomic load, for the hot path.
func (g *Guard) Refusing() bool { return g != nil && g.refusing.Load() }

// Free is the free space seen by the last Check, in bytes.
func (g *Guard) Free() uint64 { return g.free.Load() }

// Threshold is the threshold in bytes for the volume seen by the last Check.
func (g *Guard) Threshold() uint64 { return Threshold(g.cfg.MinFree, g.total.Load()) }

// Known reports whether the last statfs succeeded (Free means something).
func (g *Guard) Known() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.checked && !g.statErr
}

// Dir is the watched directory.
func (g *Guard) Dir() string { return g.cfg.Dir }

// Check reads the volume now and updates the state; it returns whether
// writes are refused. A failing statfs keeps the previous state (refusing
// writes because statfs broke would turn a monitoring problem into an outage).
func (g *Guard) Check() bool {
	u, err := g.cfg.Stat(g.cfg.Dir)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if !g.statErr {
			g.statErr = true
			g.cfg.Logger.Error("cannot read free disk space; keeping the last decision", "dir", g.cfg.Dir, "err", err)
		}
		return g.refusing.Load()
	}
	if g.statErr {
		g.statErr = false
		g.cfg.Logger.Info("free disk space readable again", "dir", g.cfg.Dir)
	}
	g.free.Store(u.Free)
	g.total.Store(u.Total)
	limit := Threshold(g.cfg.MinFree, u.Total)
	refuse := u.Free < limit
	was := g.refusing.Swap(refuse)
	switch {
	case refuse && (!was || !g.checked):
		g.cfg.Logger.Warn("free disk space under --min-free-disk: refusing writes with 507 until space returns",
			"dir", g.cfg.Dir, "free_bytes", u.Free, "min_free_bytes", limit, "total_bytes", u.Total)
	case !refuse && was:
		g.cfg.Logger.Info("free disk space back over --min-free-disk: accepting writes",
			"dir", g.cfg.Dir, "free_bytes", u.Free, "min_free_bytes", limit)
	}
	g.checked = true
	return refuse
}

// Run checks every interval (DefaultInterval when <= 0) until stop is closed.
func (g *Guard) Run(stop <-chan struct{}, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.Check()
		}
	}
}
