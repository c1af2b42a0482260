package storage

import (
	"encoding/binary"
	"math"
)

// Key prefixes; see the package documentation for the layout.
const (
	prefixRecord    = 'S'
	prefixDisplaced = 'Z'
	prefixName      = 'N'
	// A displaced event's places in the time order and the name index:
	// keys of their own, because its time lags what is being written
	// (timeindex.go).
	prefixDisplacedMark = 'M'
	prefixDisplacedName = 'J'
	prefixCounter       = 'C'
	// Idempotency records by the second they were created, a group per
	// commit and API key (idemgroups.go), F one per key before the groups;
	// by API key and day (idempotency.go) when the filter that finds the
	// former is full, and before it; I is the layout before the days. The
	// layouts before are still read until their records expire.
	prefixIdemGroup = 'B'
	prefixIdemSlot  = 'F'
	prefixIdemDay   = 'H'
	prefixIdem      = 'I'
	prefixWindows   = 'R'
	prefixConfig    = 'X'
	datasetPrefLen  = 5 // prefix byte + uint32 dataset

	// Webhooks and usage alerts (outbox.go); none starts with a dataset.
	prefixOutbox   = 'O'
	prefixPending  = 'P'
	prefixDelivery = 'D'
	prefixAlert    = 'A'

	// Before records were keyed by timestamp: E ds id -> record and
	// T ds ts id -> bot mark; moved to S and Z at Open (records.go).
	prefixEventV1 = 'E'
	prefixTimeV1  = 'T'
)

// datasetPrefixes are the prefixes whose keys start with a dataset number:
// deleting a dataset deletes under each of them.
var datasetPrefixes = []byte{prefixRecord, prefixDisplaced, prefixName, prefixDisplacedMark, prefixDisplacedName, prefixVisitor, prefixVisitorV1, prefixCounter, prefixRollup, prefixGoal, prefixProfile, prefixLink, prefixCursor}

// ID is the binary form of an event id: 48 bits of Unix milliseconds then 80
// bits that keep ids unique and increasing.
type ID [16]byte

// Counter levels: the bucket widths in milliseconds.
const (
	LevelMinute = 'm'
	LevelHour   = 'h'
	LevelDay    = 'd'
)

const (
	minuteMs = int64(60_000)
	hourMs   = 60 * minuteMs
	dayMs    = 24 * hourMs
)

func levelWidth(level byte) int64 {
	switch level {
	case LevelMinute:
		return minuteMs
	case LevelHour:
		return hourMs
	default:
		return dayMs
	}
}

func appendDataset(dst []byte, prefix byte, ds uint32) []byte {
	dst = append(dst, prefix)
	return binary.BigEndian.AppendUint32(dst, ds)
}

func appendTS(dst []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ms))
}

// recordKey is S ds ts id: an event's record, in timestamp order, so that
// a time range is one scan of the records themselves.
func recordKey(dst []byte, ds uint32, ts int64, id ID) []byte {
	return append(appendTS(appendDataset(dst, prefixRecord, ds), ts), id[:]...)
}

// displacedKey is Z ds id: a displaced event's timestamp and record, which
// a lookup by id cannot find at its id's millisecond (before session 21:
// its timestamp only, the record being under S).
func displacedKey(dst []byte, ds uint32, id ID) []byte {
	return append(appendDataset(dst, prefixDisplaced, ds), id[:]...)
}

// displacedMarkKey is M ds ts id: a displaced event's place in the time
// order, as an S key is an event's.
func displacedMarkKey(dst []byte, ds uint32, ts int64, id ID) []byte {
	return append(appendTS(appendDataset(dst, prefixDisplacedMark, ds), ts), id[:]...)
}

// displacedNameKey is J ds len name ts id: a displaced event's name index
// entry, laid out as its N key would be.
func displacedNameKey(dst []byte, ds uint32, name string, ts int64, id ID) []byte {
	k := nameKey(dst, ds, name, ts, id)
	k[len(dst)] = prefixDisplacedName
	return k
}

// displaced reports whether an event's timestamp is not its id's
// millisecond: a time the client sent, or an import's. An event sent
// without a time takes its id's (the shard sets it), so live traffic
// writes no Z key.
func displaced(ts int64, id ID) bool { return ts != IDTime(id) }

// namePrefix is N ds len name: every index entry of one event name.
func namePrefix(dst []byte, ds uint32, name string) []byte {
	dst = appendDataset(dst, prefixName, ds)
	dst = append(dst, byte(len(name)))
	return append(dst, name...)
}

// nameKey is the name index key of an event: its name's prefix, timestamp, id.
func nameKey(dst []byte, ds uint32, name string, ts int64, id ID) []byte {
	return append(appendTS(namePrefix(dst, ds, name), ts), id[:]...)
}

// counterPrefix is C ds len name level; name "" counts every event.
func counterPrefix(dst []byte, ds uint32, name string, level byte) []byte {
	dst = appendDataset(dst, prefixCounter, ds)
	dst = append(dst, byte(len(name)))
	dst = append(dst, name...)
	return append(dst, level)
}

// idemDayKey is H len keyID day key: one API key's idempotency records by
// the UTC day they were created (idempotency.go).
func idemDayKey(dst []byte, keyID string, day uint32, key string) []byte {
	dst = idemScope(dst, keyID)
	dst = binary.BigEndian.AppendUint32(dst, day)
	return append(dst, key...)
}

// idemScope is H len keyID, the prefix of one API key's idempotency records.
func idemScope(dst []byte, keyID string) []byte {
	dst = append(dst, prefixIdemDay, byte(len(keyID)))
	return append(dst, keyID...)
}

// legacyIdemKey is I len keyID key, an idempotency record's key before
// the records were kept by day.
func legacyIdemKey(dst []byte, keyID, key string) []byte {
	dst = append(dst, prefixIdem, byte(len(keyID)))
	dst = append(dst, keyID...)
	return append(dst, key...)
}

func windowsKey(keyID string) []byte {
	return append([]byte{prefixWindows}, keyID...)
}

func configKey(kind, id string) []byte {
	k := make([]byte, 0, 2+len(kind)+len(id))
	k = append(k, prefixConfig)
	k = append(k, kind...)
	k = append(k, 0)
	return append(k, id...)
}

// tsIDSuffix splits the trailing ts id of an index key.
func tsIDSuffix(key []byte) (ts int64, id ID, ok bool) {
	if len(key) < 24 {
		return 0, id, false
	}
	tail := key[len(key)-24:]
	ts = int64(binary.BigEndian.Uint64(tail[:8]))
	copy(id[:], tail[8:])
	return ts, id, true
}

// rangeBounds gives [lower, upper) of index keys under prefix whose timestamp
// lies in [fromMs, toMs] (both inclusive).
func rangeBounds(prefix []byte, fromMs, toMs int64) (lower, upper []byte) {
	fromMs = max(fromMs, 0)    // stored timestamps are never negative
	toMs = max(toMs, fromMs-1) // to < from: the empty range [lower, lower)
	lower = appendTS(append([]byte(nil), prefix...), fromMs)
	if toMs >= math.MaxInt64-1 {
		return lower, prefixEnd(prefix)
	}
	upper = appendTS(append([]byte(nil), prefix...), toMs+1)
	return lower, upper
}

// prefixEnd is the smallest key greater than every key starting with prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // prefix was all 0xff: no upper bound
}
