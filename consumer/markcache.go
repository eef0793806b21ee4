package consumer

import (
	"context"
	"sync"
	"sync/atomic"
)

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

// readMark reads a subject's mark from the store and caches it.
func (p *Processor) readMark(ctx context.Context, key string) (Mark, uint64, error) {
	mark, rev, err := p.marks.Get(ctx, key)
	if err != nil {
		p.cache.drop(key)
		return mark, rev, err
	}
	p.cacheMark(key, mark, rev)
	return mark, rev, nil
}

// putMark is marks.Put keeping the cache in step.
func (p *Processor) putMark(ctx context.Context, key string, m Mark, rev uint64) (uint64, error) {
	n, err := p.marks.Put(ctx, key, m, rev)
	if err != nil {
		p.cache.drop(key)
		return n, err
	}
	p.cacheMark(key, m, n)
	return n, nil
}

// cacheMark caches lease-free marks only: a lease is another holder's
// claim, to be seen fresh (waited for, or settled).
func (p *Processor) cacheMark(key string, m Mark, rev uint64) {
	if m.Lease != nil {
		p.cache.drop(key)
		return
	}
	p.cache.put(key, m, rev)
}

// newGuess decides whether a subject this process has no mark cached for
// is claimed at once with a create, on the guess that it has no mark yet,
// instead of read first. A right guess spares the read (most events of a
// stream of new subjects, as grants being opened); a wrong one costs a
// failed create before the read. So it guesses while most recent uncached
// subjects turned out new: a tally of the last outcomes, learned from the
// creates it tried and from the reads it made instead.
//
// Safe for concurrent use.
type newGuess struct{ tally atomic.Int32 }

// newGuessSpan is how far the tally goes each way: how many outcomes of
// the other kind it takes to change its mind after a long run of one.
const newGuessSpan = 16

func (g *newGuess) guess() bool { return g.tally.Load() >= 0 }

// learn records whether an uncached subject had no mark.
func (g *newGuess) learn(isNew bool) {
	for {
		old := g.tally.Load()
		next := old - 1
		if isNew {
			next = old + 1
		}
		if next > newGuessSpan || next < -newGuessSpan || g.tally.CompareAndSwap(old, next) {
			return
		}
	}
}
