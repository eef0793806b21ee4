package gateway

import (
	"sync"
	"time"
)

// rejectLimiter lets a few "rejected" audit records per provider per second
// through and counts the rest, so an unauthenticated flood cannot fill the
// AUDIT stream. The count rides on the next record let through.
type rejectLimiter struct {
	perSecond int
	mu        sync.Mutex
	state     map[string]*rejectWindow
}

type rejectWindow struct {
	start      time.Time
	n          int
	suppressed int
}

func newRejectLimiter(perSecond int) *rejectLimiter {
	return &rejectLimiter{perSecond: perSecond, state: map[string]*rejectWindow{}}
}

// allow reports whether a record for provider may be written now, and if
// so how many earlier ones it stands for.
func (l *rejectLimiter) allow(provider string, now time.Time) (ok bool, suppressed int) {
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
	if w.n >= l.perSecond {
		w.suppressed++
		return false, 0
	}
	w.n++
	s := w.suppressed
	w.suppressed = 0
	return true, s
}
