package gateway

import (
	"sync"
	"time"
)

// rejectLimiter lets a few records (or log lines) per provider per second
// through and counts the rest, so an unauthenticated flood cannot fill the
// AUDIT stream or the log. The count rides on the next record let through;
// when none comes within the second (the flood stopped), the last one held
// back is written late, carrying the others: before, those counts were
// lost (review 9).
type rejectLimiter struct {
	perSecond int
	after     func(time.Duration, func()) *time.Timer // time.AfterFunc
	mu        sync.Mutex
	state     map[string]*rejectWindow
	// flushed: flush ran (a stop); from then on every record is let
	// through at once, none held behind a timer that would fire after
	// the AUDIT writer stopped.
	flushed bool
	// writing counts late writes under way, which flush waits for.
	writing sync.WaitGroup
}

type rejectWindow struct {
	start      time.Time
	n          int
	suppressed int
	// late writes the last held-back record with the count of those it
	// stands for besides itself; timer runs it when the window ends.
	late  func(suppressed int)
	timer *time.Timer
}

func newRejectLimiter(perSecond int, after func(time.Duration, func()) *time.Timer) *rejectLimiter {
	if after == nil {
		after = time.AfterFunc
	}
	return &rejectLimiter{perSecond: perSecond, after: after, state: map[string]*rejectWindow{}}
}

// allow reports whether a record for provider may be written now, and if
// so how many earlier ones it stands for. When it may not, late (if not
// nil) is kept: unless a record is let through first, it is called about
// a second later with the number of other held-back records it stands for.
func (l *rejectLimiter) allow(provider string, now time.Time, late func(suppressed int)) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.state[provider]
	if w == nil {
		w = &rejectWindow{start: now}
		l.state[provider] = w
	}
	if now.Sub(w.start) >= time.Second {
		w.start, w.n = now, 0
	}
	if w.n >= l.perSecond && !l.flushed {
		w.suppressed++
		if late != nil {
			w.late = late
			if w.timer == nil {
				w.timer = l.after(time.Second, func() { l.writeLate(provider) })
			}
		}
		return false, 0
	}
	w.n++
	s := w.suppressed
	w.suppressed, w.late = 0, nil
	return true, s
}

// do runs write now, with how many held-back records it stands for, when
// provider's limit lets it, and reports true; else write is held back
// (see allow) and do reports false.
func (l *rejectLimiter) do(provider string, now time.Time, write func(suppressed int)) bool {
	ok, suppressed := l.allow(provider, now, write)
	if ok {
		write(suppressed)
	}
	return ok
}

// writeLate writes provider's last held-back record if no record let
// through took the count since.
func (l *rejectLimiter) writeLate(provider string) {
	l.mu.Lock()
	w := l.state[provider]
	w.timer = nil
	late, n := w.late, w.suppressed
	if late == nil || n == 0 {
		l.mu.Unlock()
		return
	}
	w.suppressed, w.late = 0, nil
	l.writing.Add(1)
	l.mu.Unlock()
	defer l.writing.Done()
	late(n - 1)
}

// flush writes every provider's held-back record now, waits for a late
// write a timer began, and lets every later record through at once (at a
// stop, before the AUDIT writer stops: a timer firing after it lost the
// count; a request still running past the HTTP shutdown would be held
// again).
func (l *rejectLimiter) flush() {
	type held struct {
		late func(int)
		n    int
	}
	var all []held
	l.mu.Lock()
	l.flushed = true
	for _, w := range l.state {
		if w.timer != nil {
			w.timer.Stop()
			w.timer = nil
		}
		if w.late != nil && w.suppressed > 0 {
			all = append(all, held{w.late, w.suppressed})
		}
		w.suppressed, w.late = 0, nil
	}
	l.mu.Unlock()
	for _, h := range all {
		h.late(h.n - 1)
	}
	l.writing.Wait() // a timer's late write that took its record first
}
