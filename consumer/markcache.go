package consumer

import "sync"

// markCache remembers the last lease-free mark and revision this process
// read or wrote per subject, so applying an event newer than it starts with
// the lease claim instead of a read. Every change of a mark gets a new
// revision, so a stale entry can only make that compare-and-set fail; the
// processor then reads the store. Decisions taken without a write never
// use it.
//
// Safe for concurrent use. Bounded: when full it starts over, which only
// costs reads.
type markCache struct {
	mu  sync.Mutex
	max int
	m   map[string]cachedMark
}

type cachedMark struct {
	mark Mark
	rev  uint64
}

func newMarkCache(max int) *markCache {
	return &markCache{max: max, m: make(map[string]cachedMark)}
}

func (c *markCache) get(key string) (Mark, uint64, bool) {
	if c == nil {
		return Mark{}, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return e.mark, e.rev, ok
}

func (c *markCache) put(key string, m Mark, rev uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[key] = cachedMark{mark: m, rev: rev}
}

func (c *markCache) drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
