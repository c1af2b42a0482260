package storage

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// mergerName is stored by Pebble; changing it makes old data unopenable.
const mergerName = "eventd.merge.v1"

// merger lets the shards add to counters without reading them first, so
// concurrent shards never race on a read-modify-write.
var merger = &pebble.Merger{
	Name: mergerName,
	Merge: func(key, value []byte) (pebble.ValueMerger, error) {
		if len(key) == 0 {
			return nil, fmt.Errorf("storage: no merge operator for key prefix %q", key[:min(1, len(key))])
		}
		if key[0] == prefixProfile {
			return newProfileMerger(value) // profile.go
		}
		if key[0] != prefixCounter {
			return rollupMerger(key, value) // S and U rollups; anything else is refused there
		}
		m := &addMerger{}
		return m, m.MergeNewer(value)
	},
}

// addMerger sums int64 little-endian operands.
type addMerger struct{ sum int64 }

func (m *addMerger) MergeNewer(value []byte) error {
	if len(value) != 8 {
		return errCorrupt
	}
	m.sum += int64(binary.LittleEndian.Uint64(value))
	return nil
}

func (m *addMerger) MergeOlder(value []byte) error { return m.MergeNewer(value) }

func (m *addMerger) Finish(bool) ([]byte, io.Closer, error) {
	return appendCount(nil, m.sum), nil, nil
}

// appendCount is the stored form of a counter value or operand.
func appendCount(dst []byte, n int64) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(n))
}

func decodeCount(v []byte) int64 {
	if len(v) != 8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(v))
}
