package storage

import "bytes"

// Bot events (a top-level "$bot": true, set by the enrichment at ingest)
// are kept apart in the derived data, so analytics can leave them out in
// O(buckets) and still count them exactly when asked (bots=include):
//
//   - Counters and rollups: a bot event is derived under its bot series,
//     botMark+name for its name and botAll for every event, never under the
//     name and "" that the default query reads. Counts and sums of the two
//     series add, sketches unite; nothing is ever subtracted (a HyperLogLog
//     sketch cannot forget). Lists (GET /events totals) read both series.
//   - Index values: the T, N and W values of a bot event start with botMark
//     (T: the mark alone; N: mark+visitor; W: mark+name), so the partial
//     minutes at a range's ends, visitor filters, funnels, retention and
//     paths can tell bots apart without reading records.
//
// botMark is 0xff: it never occurs in UTF-8 text (visitor ids) nor in an
// event name ([A-Za-z0-9_]), so a marked value cannot be mistaken for a
// human one. Events stored before this existed keep unmarked index values
// and their counts in the human series: both agree, so old bots count as
// humans consistently until an erasure rebuilds the day's rollups.
const botMark = 0xff

// botAll is the bot series of every event (the bots' "").
const botAll = "\xff"

// botKey is what a "$bot" member must contain. It starts with '$', not
// with the quote: bytes.Index looks for the needle's first byte, and
// quotes are everywhere in JSON while '$' is in a few enriched names only
// (a human's enriched pageview: 50 ns, against 195 ns with the quote
// first; a purchase without '$' 11 ns; BenchmarkIsBot).
var botKey = []byte(`$bot"`)

// IsBot reports whether an event's properties flag it as a bot: a top-level
// member "$bot" whose value is true. The substring test first keeps the
// cost for the (usual) event without the member to one memmem.
func IsBot(props []byte) bool {
	if !bytes.Contains(props, botKey) {
		return false
	}
	v, ok := lookupMember(props, "$bot")
	return ok && string(v) == "true"
}

// seriesName is the derived-data series an event of name counts under:
// name itself, or its bot series.
func seriesName(name string, bot bool) string {
	if !bot {
		return name
	}
	if name == "" {
		return botAll
	}
	return botAll + name
}

// splitBot strips the bot mark of an index value or of a series name
// (botAll gives the empty name).
func splitBot(v []byte) ([]byte, bool) {
	if len(v) > 0 && v[0] == botMark {
		return v[1:], true
	}
	return v, false
}

// appendBotMark starts an index value with the mark when bot is set.
func appendBotMark(dst []byte, bot bool) []byte {
	if bot {
		return append(dst, botMark)
	}
	return dst
}
