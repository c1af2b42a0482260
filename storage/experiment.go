package storage

import (
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Experiment changes what the store writes and how Pebble is tuned, so that
// cmd/eventd-keycost can measure what each index key and each Pebble setting
// costs per event with eventd's own write path. serve never sets it.
type Experiment struct {
	// SkipName and SkipVisitor leave the N and W (visitor) index keys out
	// of AddEvent (a displaced event's J key is still written). A store written so answers lists, counts, funnels and
	// erasure wrongly: use them only on a throwaway directory.
	SkipName, SkipVisitor bool
	// Pebble, if not nil, adjusts Pebble's options after eventd's own and
	// before the store opens.
	Pebble func(*pebble.Options)
}

// skipKeys is the part of an Experiment that AddEvent reads per event.
type skipKeys struct{ name, visitor bool }

func (x *Experiment) skip() skipKeys {
	if x == nil {
		return skipKeys{}
	}
	return skipKeys{name: x.SkipName, visitor: x.SkipVisitor}
}

// SealVisitorMemory writes every day of the visitor index held in memory
// to Pebble now, splitting it as the sealer does past the memory's bound:
// for measurements (eventd-keycost counts it in the events' cost).
func (d *DB) SealVisitorMemory() error {
	m := d.vmem
	m.mu.Lock()
	days := make([]uint32, 0, len(m.days))
	for day := range m.days {
		days = append(days, day)
	}
	m.mu.Unlock()
	slices.Sort(days)
	for _, day := range days {
		if err := d.sealVisitorDay(day, false); err != nil {
			return err
		}
	}
	return nil
}
