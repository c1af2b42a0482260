package storage

import "sync"

// linkCache remembers identity links known to be stored, so that a
// message that only repeats a link (analytics.js sends userId and
// anonymousId on every call once a user is identified) writes nothing: no
// link keys again and no profile operand, which would otherwise pile up as
// merge operands on the person's key. Skipping loses nothing: first_seen
// and last_seen are read from the visitor index as well (profile.go).
//
// Entries are added only after the batch that wrote them committed, and
// only if no erasure ran in between (gen): an erasure deletes link keys,
// then clears the cache and moves gen on, so a link it deleted is never
// remembered as stored.
type linkCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]struct{}
}

// maxCachedLinks bounds the cache (about 4 MiB); past it, it starts over.
const maxCachedLinks = 1 << 16

// known reports whether every link of u is stored, and the generation to
// hand back to add.
func (c *linkCache) known(ds uint32, u *ProfileUpdate, scratch []byte) (bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := len(u.Links) > 0
	for _, l := range u.Links {
		if l == "" || l == u.ID {
			continue
		}
		scratch = linkKey(scratch[:0], ds, u.ID, l)
		if _, ok := c.m[string(scratch)]; !ok {
			all = false
			break
		}
	}
	return all, c.gen
}

// add remembers committed link keys unless an erasure ran since gen.
func (c *linkCache) add(gen uint64, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m)+len(keys) > maxCachedLinks {
		c.m = make(map[string]struct{}, 1024)
	}
	for _, k := range keys {
		c.m[k] = struct{}{}
	}
}

// clear forgets every link, after an erasure or a dataset deletion.
func (c *linkCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m = nil
}
