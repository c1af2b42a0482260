package analytics

import (
	"sort"
	"strings"
)

// Row is one line of a breakdown.
type Row struct {
	Key   string  `json:"key"`
	Value float64 `json:"value"`
}

// Top sorts rows largest value first (ties by key, so answers are stable)
// and keeps at most limit of them.
func Top(rows []Row, limit int) []Row {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Value != rows[j].Value {
			return rows[i].Value > rows[j].Value
		}
		return strings.Compare(rows[i].Key, rows[j].Key) < 0
	})
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return rows
}
