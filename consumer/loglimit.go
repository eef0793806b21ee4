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
	return true, held
}
