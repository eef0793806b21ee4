package consumer

import (
	"sync"
	"time"
)

// retryLinesPerSecond is how many "event will be retried" lines a
// provider logs a second; the rest are counted and the next line says how
// many it stands for. A receiver that is down at a few hundred events a
// second logged one line per attempt per event, past journald's default
// rate limit (a metrics and logs audit, stop 38); the retries themselves
// are counted in hookgate_consumer_events_total{decision="retry"}.
const retryLinesPerSecond = 5

// LineLimit lets at most perSecond lines a second through per key: for a
// log line that a failure repeats per event (a retry, a lost AUDIT
// record). Safe for concurrent use.
type LineLimit struct {
	perSecond int
	mu        sync.Mutex
	by        map[string]*lineWindow
}

type lineWindow struct {
	second int64
	n      int // lines let through in second
	held   int // lines held back since the last one let through
	// later writes the last held-back line at the end of its second,
	// standing for all held (AllowOrLater); armed: its timer is set.
	later func(suppressed int)
	armed bool
}

// NewLineLimit returns a LineLimit of perSecond lines a second per key.
func NewLineLimit(perSecond int) *LineLimit {
	return &LineLimit{perSecond: perSecond, by: map[string]*lineWindow{}}
}

// Allow reports whether a line for key may be written at now and, when
// it may, how many were held back since the last one written.
func (l *LineLimit) Allow(key string, now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.by[key]
	if w == nil {
		w = &lineWindow{}
		l.by[key] = w
	}
	if s := now.Unix(); s != w.second {
		w.second, w.n = s, 0
	}
	if w.n >= l.perSecond {
		w.held++
		return false, 0
	}
	w.n++
	held, w.held = w.held, 0
	w.later = nil
	return true, held
}

// AllowOrLater is Allow, and for a line held back keeps later, which
// writes it, until the end of its second: if no line let through by then
// has carried the count, later runs then, with suppressed = the lines
// held back but itself. So a burst's tail is in the log too (audit 42:
// 30 dead letters told by lines standing for 5, the rest never said).
func (l *LineLimit) AllowOrLater(key string, now time.Time, later func(suppressed int)) (ok bool, held int) {
	ok, held = l.Allow(key, now)
	if ok {
		return ok, held
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.by[key]
	w.later = later
	if !w.armed {
		w.armed = true
		wait := min(max(time.Unix(w.second+1, 0).Sub(now), 0), time.Second)
		time.AfterFunc(wait, func() { l.flush(key) })
	}
	return false, 0
}

// Flush runs now every held-back line AllowOrLater keeps for the end of
// its second: at a stop, whose process may not live to that end (a CI run
// saw a stop's last lines tell 15 of 20 lost AUDIT records).
func (l *LineLimit) Flush() {
	l.mu.Lock()
	keys := make([]string, 0, len(l.by))
	for key := range l.by {
		keys = append(keys, key)
	}
	l.mu.Unlock()
	for _, key := range keys {
		l.flush(key)
	}
}

// flush runs the held-back line AllowOrLater kept for key, if no line has
// carried its count since.
func (l *LineLimit) flush(key string) {
	l.mu.Lock()
	w := l.by[key]
	w.armed = false
	later, held := w.later, w.held
	if later == nil || held == 0 {
		l.mu.Unlock()
		return
	}
	w.later, w.held = nil, 0
	l.mu.Unlock()
	later(held - 1)
}
