package storage

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// Identity in analytics: evaluations that group events by visitor (funnels,
// sequence goals, once-per-visitor goal completions, unique visitors of a
// property breakdown) group them by person instead, where the link is known
// when they run. A person is named by the smallest id of its link component
// (breadth first from the id, at most MaxProfileIDs ids, as Profile).

// resolverMemo bounds the ids one Resolver remembers; past it the memo starts over.
const resolverMemo = 1 << 16

// Resolver maps the visitor ids of one dataset to their person. It reads
// the links through one iterator and remembers every id of each component
// it walked, so a query touching many visitors pays about one seek per
// visitor, and nothing at all when the dataset has no link. Not safe for
// concurrent use; Close it after use.
type Resolver struct {
	ds   uint32
	it   *pebble.Iterator // nil: the dataset has no links
	memo map[string]string
	key  []byte
}

// NewResolver starts resolving ids of ds against the links stored now.
func (d *DB) NewResolver(ds uint32) (*Resolver, error) {
	r := &Resolver{ds: ds}
	lo := appendDataset(nil, prefixLink, ds)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: appendDataset(nil, prefixLink, ds+1)})
	if err != nil {
		return nil, err
	}
	if !it.First() {
		err := it.Error()
		_ = it.Close()
		return r, err
	}
	r.it = it
	r.memo = make(map[string]string)
	return r, nil
}

// HasLinks reports whether the dataset had any link when r started: when
// not, Person returns every id as it is.
func (r *Resolver) HasLinks() bool { return r.it != nil }

// Close releases the iterator.
func (r *Resolver) Close() error {
	if r.it == nil {
		return nil
	}
	err := r.it.Close()
	r.it = nil
	return err
}

// links appends the ids linked directly to id.
func (r *Resolver) links(dst []string, id string) ([]string, error) {
	r.key = linkPrefix(r.key[:0], r.ds, id)
	for ok := r.it.SeekGE(r.key); ok && bytes.HasPrefix(r.it.Key(), r.key); ok = r.it.Next() {
		dst = append(dst, string(r.it.Key()[len(r.key):]))
	}
	return dst, r.it.Error()
}

// Person is the person id belongs to: the smallest id of its link
// component, id itself when it has no link.
func (r *Resolver) Person(id string) (string, error) {
	if r.it == nil {
		return id, nil
	}
	if p, ok := r.memo[id]; ok {
		return p, nil
	}
	ids, err := componentOf(id, r.links)
	if err != nil {
		return "", err
	}
	p := smallest(ids)
	if len(r.memo)+len(ids) > resolverMemo {
		clear(r.memo)
	}
	if len(ids) < MaxProfileIDs {
		// A bounded walk from another id could reach other ids: remember
		// the whole component only when it was walked whole.
		for _, x := range ids {
			r.memo[x] = p
		}
	} else {
		r.memo[id] = p
	}
	return p, nil
}

// PersonIDs are the ids of the person id belongs to (id first, at most
// MaxProfileIDs, as Profile walks them); just id when it has no link.
func (d *DB) PersonIDs(ds uint32, id string) ([]string, error) {
	ids, _, err := profileReader{r: d.db, mem: d.vmem, ds: ds}.component(id)
	return ids, err
}

// PersonOf is the name of a person: the smallest of its ids.
func PersonOf(ids []string) string { return smallest(ids) }

func smallest(ids []string) string {
	p := ids[0]
	for _, x := range ids[1:] {
		if x < p {
			p = x
		}
	}
	return p
}

// componentOf walks links breadth first from id, at most MaxProfileIDs ids.
func componentOf(id string, links func([]string, string) ([]string, error)) ([]string, error) {
	seen := map[string]bool{id: true}
	ids := []string{id}
	var next []string
	var err error
	for i := 0; i < len(ids); i++ {
		if next, err = links(next[:0], ids[i]); err != nil {
			return nil, err
		}
		for _, n := range next {
			if seen[n] {
				continue
			}
			if len(ids) >= MaxProfileIDs {
				return ids, nil
			}
			seen[n] = true
			ids = append(ids, n)
		}
	}
	return ids, nil
}
