package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Profiles and identity links (issue 14, contract section 12).
//
//	Y ds id           profile of one id: first/last seen and traits (merge: last write wins per trait)
//	K ds len2 a b     a and b are ids of one person (written both ways, empty value)
//
// A shard never reads before it writes a profile: each identify adds a merge
// operand, so two shards updating one profile at once cannot lose a trait.
const (
	prefixProfile = 'Y'
	prefixLink    = 'K'
)

// MaxProfileIDs bounds the ids of one person a profile read follows: a
// breadth-first walk of the links from the id asked for stops once it has
// this many ids (the id itself included).
const MaxProfileIDs = 100

// MaxProfileTraits bounds the traits one profile key keeps: past it, the
// merger keeps the traits with the smallest names (whatever the order the
// operands are merged in), so a stream of ever-new trait names cannot grow
// one value without end.
const MaxProfileTraits = 1000

// profileVersion is the first byte of every profile value and operand.
const profileVersion = 1

// ProfileUpdate is what one identify, alias or two-id message changes in a dataset's profiles.
type ProfileUpdate struct {
	ID        string   // the profile whose traits change: userId, else anonymousId
	Traits    []byte   // compact JSON object (nil: no trait change, e.g. alias)
	Links     []string // other ids of the same person to link with ID (anonymousId, previousId); may be empty
	Timestamp int64    // the event's time, Unix ms: last write wins per trait by it
}

// Trait is one trait of a profile: its name, raw JSON value and the time
// of the message that set it.
type Trait struct {
	Key       string
	Value     []byte // raw JSON
	Timestamp int64
}

// ProfileRecord is what one profile key holds.
type ProfileRecord struct {
	ID        string
	FirstSeen int64 // Unix ms
	LastSeen  int64
	Traits    []Trait // sorted by Key
}

// Profile is one person as a read sees it: the traits merged over every id
// linked to the one asked for.
type Profile struct {
	ID        string
	Traits    []Trait // sorted by Key; last write (by timestamp) wins across the ids
	FirstSeen int64   // Unix ms; valid when HasSeen
	LastSeen  int64
	HasSeen   bool     // false only when no id has a profile key or an event
	LinkedIDs []string // the other ids of the person, sorted
	Truncated bool     // the walk stopped at MaxProfileIDs ids
}

// profileKey is Y ds id: nothing follows the id, so it needs no length,
// and the keys of a dataset sort by id (ListProfiles pages in that order).
func profileKey(dst []byte, ds uint32, id string) []byte {
	return append(appendDataset(dst, prefixProfile, ds), id...)
}

// linkPrefix is K ds len2 a: every link of id a.
func linkPrefix(dst []byte, ds uint32, a string) []byte {
	dst = appendDataset(dst, prefixLink, ds)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(a)))
	return append(dst, a...)
}

func linkKey(dst []byte, ds uint32, a, b string) []byte {
	return append(linkPrefix(dst, ds, a), b...)
}

// AddProfile adds one message's profile change to the open batch, committed
// (fsynced) with the event: a merge operand on the profile key of u.ID
// (first and last seen = u.Timestamp, the traits of u.Traits stamped with
// it) and both link keys of each id in u.Links. A nil u adds nothing.
func (b *Batch) AddProfile(ds uint32, u *ProfileUpdate) {
	if u == nil || u.ID == "" {
		return
	}
	known, gen := b.db.links.known(ds, u, b.scratch[:0])
	if known && len(u.Traits) == 0 {
		return // a repeated link: see linkcache.go
	}
	if len(b.links) == 0 {
		b.linkGen = gen
	}
	k := profileKey(b.scratch[:0], ds, u.ID)
	v := appendProfileOperand(k[len(k):], u)
	_ = b.b.Merge(k, v, nil)
	b.scratch = v[:0]
	for _, l := range u.Links {
		if l == "" || l == u.ID {
			continue
		}
		k = linkKey(b.scratch[:0], ds, u.ID, l)
		_ = b.b.Set(k, nil, nil)
		b.links = append(b.links, string(k))
		k = linkKey(k[:0], ds, l, u.ID)
		_ = b.b.Set(k, nil, nil)
		b.scratch = k[:0]
	}
}

// appendProfileOperand encodes u as a profile value. Traits that are not a
// JSON object are ignored (the decoder upstream only passes objects).
func appendProfileOperand(dst []byte, u *ProfileUpdate) []byte {
	var traits []Trait
	if len(u.Traits) > 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(u.Traits, &m) == nil {
			traits = make([]Trait, 0, len(m))
			for k, v := range m {
				traits = append(traits, Trait{Key: k, Value: v, Timestamp: u.Timestamp})
			}
			slices.SortFunc(traits, func(a, b Trait) int { return strings.Compare(a.Key, b.Key) })
			if len(traits) > MaxProfileTraits {
				traits = traits[:MaxProfileTraits]
			}
		}
	}
	return appendProfileValue(dst, u.Timestamp, u.Timestamp, traits)
}

// A profile value (and operand, same form) is:
//
//	version (1) | varint first_seen | varint last_seen | uvarint n |
//	n x (uvarint len, key, varint timestamp, uvarint len, raw JSON value)
//
// with traits sorted by key.
func appendProfileValue(dst []byte, first, last int64, traits []Trait) []byte {
	dst = append(dst, profileVersion)
	dst = binary.AppendVarint(dst, first)
	dst = binary.AppendVarint(dst, last)
	dst = binary.AppendUvarint(dst, uint64(len(traits)))
	for _, t := range traits {
		dst = binary.AppendUvarint(dst, uint64(len(t.Key)))
		dst = append(dst, t.Key...)
		dst = binary.AppendVarint(dst, t.Timestamp)
		dst = binary.AppendUvarint(dst, uint64(len(t.Value)))
		dst = append(dst, t.Value...)
	}
	return dst
}

// decodeProfileValue calls fn for each trait of v (key and value alias v)
// and returns its first and last seen.
func decodeProfileValue(v []byte, fn func(key, value []byte, ts int64)) (first, last int64, err error) {
	if len(v) < 1 || v[0] != profileVersion {
		return 0, 0, errCorrupt
	}
	p := v[1:]
	readVarint := func() (int64, bool) {
		x, k := binary.Varint(p)
		if k <= 0 {
			return 0, false
		}
		p = p[k:]
		return x, true
	}
	readBytes := func() ([]byte, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return nil, false
		}
		out := p[k : k+int(n)]
		p = p[k+int(n):]
		return out, true
	}
	var ok bool
	if first, ok = readVarint(); !ok {
		return 0, 0, errCorrupt
	}
	if last, ok = readVarint(); !ok {
		return 0, 0, errCorrupt
	}
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return 0, 0, errCorrupt
	}
	p = p[k:]
	for range n {
		key, ok := readBytes()
		if !ok {
			return 0, 0, errCorrupt
		}
		ts, ok := readVarint()
		if !ok {
			return 0, 0, errCorrupt
		}
		val, ok := readBytes()
		if !ok {
			return 0, 0, errCorrupt
		}
		fn(key, val, ts)
	}
	if len(p) != 0 {
		return 0, 0, errCorrupt
	}
	return first, last, nil
}

func decodeProfileRecord(id string, v []byte) (ProfileRecord, error) {
	r := ProfileRecord{ID: id}
	var err error
	r.FirstSeen, r.LastSeen, err = decodeProfileValue(v, func(key, value []byte, ts int64) {
		r.Traits = append(r.Traits, Trait{Key: string(key), Value: bytes.Clone(value), Timestamp: ts})
	})
	return r, err
}

// profileMerger is the merge operator of Y keys: per trait the value with
// the greatest timestamp (a tie goes to the newer operand), the smallest
// first seen and the greatest last seen. An operand and a merged value have
// the same form, so a partial merge (Finish without the base) is a valid
// operand of a later merge.
type profileMerger struct {
	first, last int64
	traits      []Trait // sorted by Key
}

func newProfileMerger(value []byte) (pebble.ValueMerger, error) {
	m := &profileMerger{}
	f, l, err := decodeProfileValue(value, func(key, val []byte, ts int64) {
		m.traits = append(m.traits, Trait{Key: string(key), Value: bytes.Clone(val), Timestamp: ts})
	})
	if err != nil {
		return nil, err
	}
	m.first, m.last = f, l
	return m, nil
}

func (m *profileMerger) merge(value []byte, newer bool) error {
	f, l, err := decodeProfileValue(value, func(key, val []byte, ts int64) {
		i, found := slices.BinarySearchFunc(m.traits, key, func(t Trait, k []byte) int { return strings.Compare(t.Key, string(k)) })
		if found {
			cur := &m.traits[i]
			if ts > cur.Timestamp || (newer && ts == cur.Timestamp) {
				cur.Value = bytes.Clone(val)
				cur.Timestamp = ts
			}
			return
		}
		if len(m.traits) >= MaxProfileTraits {
			if i == len(m.traits) {
				return // greater than every name kept
			}
			m.traits = m.traits[:len(m.traits)-1]
		}
		m.traits = slices.Insert(m.traits, i, Trait{Key: string(key), Value: bytes.Clone(val), Timestamp: ts})
	})
	if err != nil {
		return err
	}
	m.first = min(m.first, f)
	m.last = max(m.last, l)
	return nil
}

// MergeNewer folds in an operand written after every one merged so far.
func (m *profileMerger) MergeNewer(value []byte) error { return m.merge(value, true) }

// MergeOlder folds in an operand written before every one merged so far.
func (m *profileMerger) MergeOlder(value []byte) error { return m.merge(value, false) }

// Finish encodes the merged value; with or without the base it is the same
// form, so compactions may stop anywhere in a key's history.
func (m *profileMerger) Finish(bool) ([]byte, io.Closer, error) {
	return appendProfileValue(nil, m.first, m.last, m.traits), nil, nil
}

// profileReader reads profiles and links from one consistent snapshot.
type profileReader struct {
	r      pebble.Reader
	live   pebble.Reader // the store itself, for the visitor index: its memory days match the store, not r when r is a snapshot
	mem    *visitorMem   // DB.vmem; the visitor index of recent days
	ds     uint32
	legacy bool // DB.legacyVisitors
}

// record reads the profile key of id; found is false when it has none.
func (pr profileReader) record(id string) (rec ProfileRecord, found bool, err error) {
	v, closer, err := pr.r.Get(profileKey(nil, pr.ds, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return ProfileRecord{}, false, nil
	}
	if err != nil {
		return ProfileRecord{}, false, err
	}
	defer closer.Close()
	rec, err = decodeProfileRecord(id, v)
	return rec, err == nil, err
}

// links appends the ids linked directly to id, in byte order.
func (pr profileReader) links(dst []string, id string) ([]string, error) {
	p := linkPrefix(nil, pr.ds, id)
	it, err := pr.r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return dst, err
	}
	for it.First(); it.Valid(); it.Next() {
		dst = append(dst, string(it.Key()[len(p):]))
	}
	return dst, it.Close()
}

// component walks the links breadth first from id and returns the ids
// reached (id first), at most MaxProfileIDs of them; truncated says the walk
// stopped there.
func (pr profileReader) component(id string) (ids []string, truncated bool, err error) {
	ids, err = componentOf(id, pr.links)
	if err != nil {
		return nil, false, err
	}
	if len(ids) < MaxProfileIDs {
		return ids, false, nil
	}
	// Exactly MaxProfileIDs ids: truncated when any of them links further.
	in := make(map[string]bool, len(ids))
	for _, x := range ids {
		in[x] = true
	}
	var next []string
	for _, x := range ids {
		if next, err = pr.links(next[:0], x); err != nil {
			return nil, false, err
		}
		for _, n := range next {
			if !in[n] {
				return ids, true, nil
			}
		}
	}
	return ids, false, nil
}

// visitorSpan is the time of the oldest and newest visitor index entry of a visitor.
func (pr profileReader) visitorSpan(id string) (first, last int64, ok bool, err error) {
	r := pr.live
	if r == nil {
		r = pr.r
	}
	it, err := openVisitor(r, pr.mem, pr.legacy, pr.ds, id, 0, math.MaxInt64)
	if err != nil {
		return 0, 0, false, err
	}
	defer it.Close()
	if !it.First() {
		return 0, 0, false, it.Error()
	}
	first, _, ok = tsIDSuffix(it.Key())
	if !ok || !it.Last() {
		return 0, 0, false, errCorrupt
	}
	last, _, ok = tsIDSuffix(it.Key())
	if !ok {
		return 0, 0, false, errCorrupt
	}
	return first, last, true, it.Error()
}

// Profile reads the person id belongs to in ds: the ids linked to it
// (breadth first, at most MaxProfileIDs), their traits merged (the greatest
// timestamp wins; on a tie the trait of id itself, then that of the smallest
// id), first seen the earliest of their profile keys and oldest events, last
// seen the latest of their profile keys and newest events. ErrNotFound when
// id has neither a profile key nor a link.
func (d *DB) Profile(ds uint32, id string) (Profile, error) {
	snap := d.db.NewSnapshot()
	defer snap.Close()
	pr := profileReader{r: snap, live: d.db, mem: d.vmem, ds: ds, legacy: d.legacyVisitors}
	ids, truncated, err := pr.component(id)
	if err != nil {
		return Profile{}, err
	}
	out := Profile{ID: id, Truncated: truncated}
	// id first, then the others in byte order: that is the tie order.
	others := slices.Clone(ids[1:])
	slices.Sort(others)
	found := false
	merged := map[string]Trait{}
	seen := func(f, l int64) {
		if !out.HasSeen {
			out.FirstSeen, out.LastSeen, out.HasSeen = f, l, true
			return
		}
		out.FirstSeen = min(out.FirstSeen, f)
		out.LastSeen = max(out.LastSeen, l)
	}
	for i, x := range append([]string{id}, others...) {
		rec, ok, err := pr.record(x)
		if err != nil {
			return Profile{}, err
		}
		if ok {
			if i == 0 {
				found = true
			}
			seen(rec.FirstSeen, rec.LastSeen)
			for _, t := range rec.Traits {
				if cur, ok := merged[t.Key]; !ok || t.Timestamp > cur.Timestamp {
					merged[t.Key] = t
				}
			}
		}
		f, l, ok, err := pr.visitorSpan(x)
		if err != nil {
			return Profile{}, err
		}
		if ok {
			seen(f, l)
		}
	}
	if !found && len(ids) == 1 {
		return Profile{}, ErrNotFound
	}
	out.Traits = make([]Trait, 0, len(merged))
	for _, t := range merged {
		out.Traits = append(out.Traits, t)
	}
	slices.SortFunc(out.Traits, func(a, b Trait) int { return strings.Compare(a.Key, b.Key) })
	out.LinkedIDs = others
	if out.LinkedIDs == nil {
		out.LinkedIDs = []string{}
	}
	return out, nil
}

// ListProfiles reads up to limit profile keys of ds with an id greater than
// after ("" from the start), in byte order of the id; more says whether
// another page follows. Each record is that key's own traits and times, not
// merged with linked ids (Profile does that for one person).
func (d *DB) ListProfiles(ds uint32, after string, limit int) (recs []ProfileRecord, more bool, err error) {
	lo := appendDataset(nil, prefixProfile, ds)
	hi := appendDataset(nil, prefixProfile, ds+1)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	// The page goes on from the first key after the cursor's own key.
	var valid bool
	if after == "" {
		valid = it.First()
	} else {
		valid = it.SeekGE(append(profileKey(nil, ds, after), 0))
	}
	recs = []ProfileRecord{}
	for ; valid; valid = it.Next() {
		if len(recs) >= limit {
			return recs, true, nil
		}
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, false, err
		}
		rec, err := decodeProfileRecord(string(k[datasetPrefLen:]), v)
		if err != nil {
			return nil, false, err
		}
		recs = append(recs, rec)
	}
	return recs, false, it.Error()
}

// eraseProfile deletes the profile key of visitor and each of its links in
// both directions, in one synced batch.
func (d *DB) eraseProfile(ds uint32, visitor string) error {
	pr := profileReader{r: d.db, mem: d.vmem, ds: ds, legacy: d.legacyVisitors}
	linked, err := pr.links(nil, visitor)
	if err != nil {
		return err
	}
	b := d.db.NewBatch()
	defer b.Close()
	_ = b.Delete(profileKey(nil, ds, visitor), nil)
	for _, l := range linked {
		_ = b.Delete(linkKey(nil, ds, visitor, l), nil)
		_ = b.Delete(linkKey(nil, ds, l, visitor), nil)
	}
	defer d.links.clear() // after the deletes are committed: linkcache.go
	return d.commit(b, pebble.Sync)
}
