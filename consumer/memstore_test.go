package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hookgate/hookgate/consumer"
)

var (
	_ consumer.Watermarks  = (*memMarks)(nil)
	_ consumer.AppliedKeys = (*memApplied)(nil)
)

// memMarks is an in-memory consumer.Watermarks with the WATERMARKS
// bucket's semantics: entries change only by compare-and-set on a
// revision, revision 0 means "must not exist yet", and revisions come from
// one counter for the whole store (as a KV bucket's stream sequence does),
// so a revision read from one key never matches another key's entry.
// Values are stored JSON-encoded, as in the bucket, so a Mark read back
// never aliases one written and times lose their monotonic reading the
// same way. Safe for concurrent use.
type memMarks struct {
	mu      sync.Mutex
	last    uint64
	entries map[string]memEntry
	// onPut, when set, sees every successful Put with the entry it
	// replaced (zero Mark when created), under the store's lock so the
	// calls come in revision order. It must not call back into the store.
	onPut func(ctx context.Context, key string, prev, next consumer.Mark)
}

type memEntry struct {
	val []byte
	rev uint64
}

func newMemMarks() *memMarks { return &memMarks{entries: map[string]memEntry{}} }

// Get implements consumer.Watermarks.
func (s *memMarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	if err := ctx.Err(); err != nil {
		return consumer.Mark{}, 0, err
	}
	s.mu.Lock()
	e, ok := s.entries[key]
	s.mu.Unlock()
	if !ok {
		return consumer.Mark{}, 0, nil
	}
	var m consumer.Mark
	if err := json.Unmarshal(e.val, &m); err != nil {
		return consumer.Mark{}, 0, fmt.Errorf("watermark %s: corrupt entry: %w", key, err)
	}
	return m, e.rev, nil
}

// Put implements consumer.Watermarks: a lost compare-and-set wraps
// consumer.ErrConflict.
func (s *memMarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	switch {
	case rev == 0 && ok:
		return 0, fmt.Errorf("put watermark %s: exists at revision %d: %w", key, e.rev, consumer.ErrConflict)
	case rev != 0 && !ok:
		return 0, fmt.Errorf("put watermark %s: absent, expected revision %d: %w", key, rev, consumer.ErrConflict)
	case rev != 0 && e.rev != rev:
		return 0, fmt.Errorf("put watermark %s: at revision %d, expected %d: %w", key, e.rev, rev, consumer.ErrConflict)
	}
	if s.onPut != nil {
		var prev consumer.Mark
		if ok {
			if err := json.Unmarshal(e.val, &prev); err != nil {
				return 0, fmt.Errorf("watermark %s: corrupt entry: %w", key, err)
			}
		}
		var next consumer.Mark
		if err := json.Unmarshal(b, &next); err != nil {
			return 0, err
		}
		s.onPut(ctx, key, prev, next)
	}
	s.last++
	s.entries[key] = memEntry{val: b, rev: s.last}
	return s.last, nil
}

// memApplied is an in-memory consumer.AppliedKeys. It keeps keys forever:
// the dedup horizon is the bucket's TTL, not the consumer's business.
// Safe for concurrent use.
type memApplied struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func newMemApplied() *memApplied { return &memApplied{keys: map[string]struct{}{}} }

// Seen implements consumer.AppliedKeys.
func (a *memApplied) Seen(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.keys[key]
	return ok, nil
}

// Remember implements consumer.AppliedKeys.
func (a *memApplied) Remember(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys[key] = struct{}{}
	return nil
}
