// Package storage keeps eventd's data in Pebble: the key layout, the event
// record codec, the secondary indexes, the counters behind exact list totals
// and the configuration records. It imports nothing else of eventd, so the
// layout can be read, tested and benchmarked on its own.
//
// Key layout (every multi-byte integer big-endian so keys sort by value):
//
//	S ds ts id              -> event record, in timestamp order: a time range is one scan
//	Z ds id                 -> ts record only for a displaced event, whose ts is not its id's
//	                                     millisecond (a client's or an import's time); an event
//	                                     sent without a time takes its id's and has none. A
//	                                     lookup by id reads S at the id's millisecond, else Z;
//	                                     record order (ids grow with time of recording) merges
//	                                     S and Z (records.go). Written before session 21: ts only,
//	                                     the record under S
//	M ds ts id              -> bot mark  a displaced event's place in the time order, read
//	                                     together with S (timeindex.go); the recent ones are held
//	                                     in memory and written a second at a time (latemem.go)
//	N ds len name ts id     -> visitor   per-name index; the visitor id ("" if none) lets funnels skip records
//	J ds len name ts id     -> visitor   a displaced event's N entry, read together with N
//	W ds day len2 visitor ts id -> name  per-visitor index, partitioned by the UTC day of ts
//	                                     (visitors.go); the value lets a name filter skip records
//	                                     (a bot event's N and W values start with 0xff: bots.go)
//	C ds len name lvl start -> int64     event counts per minute/hour/day bucket (merge operator adds;
//	                                     written by derived checkpoints, read plus the in-memory overlay)
//	U ds len name lvl start -> rollup   numeric property sums and a HyperLogLog sketch of visitor ids
//	                                     per minute/hour/day bucket (merge adds sums, takes register max; rollup.go)
//	                                     bot events count under name 0xff+name and 0xff, not name and "" (bots.go)
//	G ds kind ...           -> goal completions and evaluation cursor (rollup_goals.go)
//	L seq                   -> derived log: what one commit adds to C and U, until the next checkpoint (derived.go)
//	B slot len keyID firstID -> idempotency records of one commit, slot and API key, by the
//	                                     128th of a second they were created in, found through a filter in memory
//	                                     rebuilt at Open (idemgroups.go, idemslots.go)
//	F sec len keyID idemKey -> idempotency record, one to a key: the layout before B; read until swept
//	H len keyID day idemKey -> idempotency record, by the UTC day it was created: past the filter's
//	                                     bound, and before it (idempotency.go)
//	I len keyID idemKey     -> idempotency record of the layout before the days; read until swept
//	R keyID                 -> rate-limit windows of a key
//	X kind 0x00 id          -> configuration record (JSON owned by the engine)
//	O id len whID           -> ds       webhook outbox: event waiting for an event.created delivery (outbox.go)
//	P msg len whID          -> due step delivery not yet delivered: next attempt and failed attempts
//	D len whID msg          -> delivery  delivery log record (JSON owned by the webhook actor)
//	A len alert alert start len key key -> firing  a usage alert fired for a key in a window period
//
// ds is a uint32 dataset number (one per project and environment), ts a Unix
// millisecond timestamp as uint64, id the 16 bytes of an event id.
package storage
