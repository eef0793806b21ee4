package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadEvent is one webhook the load generator sends (and may redeliver).
type loadEvent struct {
	id       string
	key      string // the key hookgate must derive: grants:default:evt:<id>
	subject  string // grant_id
	occurred time.Time
	body     []byte
}

// attempt is one HTTP request of the load generator.
type attempt struct {
	start, end time.Time
	target     int    // index into the load's URLs
	status     int    // 0: connection error or timeout
	answer     string // "accepted" or "duplicate" on 200
	retryAfter string // Retry-After of a 503
	redelivery bool
}

// load is a portal-like sender: a few workers post signed Standard
// Webhooks events on a handful of subjects, occurred_at increasing per
// subject; about 20% of posts are redeliveries of an event already
// acknowledged. A 503 or a connection error is retried with a small
// backoff, on the next URL, until the event is acknowledged (200) or its
// deadline passes.
type load struct {
	t        testing.TB
	urls     []string
	subjects []string
	prefix   string
	client   *http.Client
	pace     time.Duration
	maxSent  int
	deadline time.Duration // per event

	stopped atomic.Bool
	wg      sync.WaitGroup

	mu        sync.Mutex
	next      int
	perSubj   map[string]int
	events    []*loadEvent
	byKey     map[string]*loadEvent
	acked     map[string]bool
	ackedList []*loadEvent
	attempts  []attempt
	problems  []string // answers a sender must never see
	gaveUp    []string
}

var loadBase = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func newLoad(t testing.TB, prefix string, urls []string) *load {
	return &load{
		t:        t,
		urls:     urls,
		subjects: []string{"G-1", "G-2", "G-3", "G-4", "G-5"},
		prefix:   prefix,
		client: &http.Client{
			Timeout:   15 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 10 * time.Second},
		},
		pace:     15 * time.Millisecond,
		maxSent:  4000,
		deadline: 45 * time.Second,
		perSubj:  map[string]int{},
		byKey:    map[string]*loadEvent{},
		acked:    map[string]bool{},
	}
}

// setURLs changes where the workers post from now on.
func (l *load) setURLs(urls []string) {
	l.mu.Lock()
	l.urls = urls
	l.mu.Unlock()
}

// run starts workers goroutines; stop ends them.
func (l *load) run(workers int) {
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for !l.stopped.Load() {
				ev, redelivery := l.pick(rng)
				if ev == nil {
					return
				}
				l.deliver(w, ev, redelivery)
				time.Sleep(l.pace)
			}
		}()
	}
}

// stop lets every worker finish its current event and waits for them.
func (l *load) stop() {
	l.stopped.Store(true)
	l.wg.Wait()
}

// pick returns a redelivery of an acknowledged event one time in five,
// else a new event; nil when maxSent is reached.
func (l *load) pick(rng *rand.Rand) (*loadEvent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ackedList) > 0 && rng.IntN(5) == 0 {
		return l.ackedList[rng.IntN(len(l.ackedList))], true
	}
	if len(l.events) >= l.maxSent {
		return nil, false
	}
	return l.newEventLocked(l.subjects[rng.IntN(len(l.subjects))]), false
}

// newEvent returns a new event on subj, the next in its order.
func (l *load) newEvent(subj string) *loadEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.newEventLocked(subj)
}

func (l *load) newEventLocked(subj string) *loadEvent {
	l.next++
	l.perSubj[subj]++
	ev := &loadEvent{
		id:       fmt.Sprintf("%s_%05d", l.prefix, l.next),
		subject:  subj,
		occurred: loadBase.Add(time.Duration(l.perSubj[subj]) * time.Second),
	}
	ev.key = "grants:default:evt:" + ev.id
	ev.body = fmt.Appendf(nil, `{"id":%q,"grant_id":%q,"type":"award.updated","occurred_at":%q,"seq":%d}`,
		ev.id, subj, ev.occurred.Format(time.RFC3339), l.perSubj[subj])
	l.events = append(l.events, ev)
	l.byKey[ev.key] = ev
	return ev
}

func (l *load) deliver(worker int, ev *loadEvent, redelivery bool) {
	end := time.Now().Add(l.deadline)
	backoff := 50 * time.Millisecond
	l.mu.Lock()
	target := worker % len(l.urls)
	l.mu.Unlock()
	for {
		l.mu.Lock()
		urls := l.urls
		l.mu.Unlock()
		target %= len(urls)
		a := l.post(target, urls[target], ev)
		a.redelivery = redelivery
		l.mu.Lock()
		l.attempts = append(l.attempts, a)
		switch {
		case a.status == http.StatusOK:
			if redelivery && a.answer != "duplicate" {
				l.problems = append(l.problems, fmt.Sprintf("redelivery of acknowledged %s answered %q", ev.key, a.answer))
			}
			if !l.acked[ev.key] {
				l.acked[ev.key] = true
				l.ackedList = append(l.ackedList, ev)
			}
			l.mu.Unlock()
			return
		case a.status == http.StatusServiceUnavailable:
			if a.retryAfter == "" {
				l.problems = append(l.problems, fmt.Sprintf("503 without Retry-After for %s", ev.key))
			}
		case a.status != 0:
			l.problems = append(l.problems, fmt.Sprintf("%s answered %d", ev.key, a.status))
			l.mu.Unlock()
			return
		}
		if time.Now().After(end) {
			l.gaveUp = append(l.gaveUp, ev.key)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		// A portal backs off, then tries again; a dead address sends it to
		// the next one.
		if a.status == 0 {
			target++
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, time.Second)
	}
}

func (l *load) post(target int, base string, ev *loadEvent) attempt {
	a := attempt{start: time.Now(), target: target}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/grants", bytes.NewReader(ev.body))
	if err != nil {
		panic(err)
	}
	for k, v := range signGrants(l.t, ev.id, ev.body) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		// Refused, reset or timed out: the sender cannot know whether it
		// was stored, and retries.
		a.end = time.Now()
		return a
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a.end = time.Now()
	a.status = resp.StatusCode
	a.retryAfter = resp.Header.Get("Retry-After")
	if a.status == http.StatusOK {
		var ans struct{ Status, Key string }
		if err := json.Unmarshal(b, &ans); err != nil || ans.Key != ev.key {
			l.mu.Lock()
			l.problems = append(l.problems, fmt.Sprintf("200 for %s with body %q", ev.key, b))
			l.mu.Unlock()
		}
		a.answer = ans.Status
	}
	return a
}

// loadStats counts the attempts within [from, to) of their start.
type loadStats struct {
	posts, ok, unavailable, connErrors, redeliveries, slow int
	noRetryAfter                                           int
}

func (s loadStats) String() string {
	return fmt.Sprintf("%d posts: %d 200, %d 503, %d connection errors, %d redeliveries, %d slower than 1s",
		s.posts, s.ok, s.unavailable, s.connErrors, s.redeliveries, s.slow)
}

// stats counts attempts that started in [from, to) (zero to: no bound).
func (l *load) stats(from, to time.Time) loadStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s loadStats
	for _, a := range l.attempts {
		if a.start.Before(from) || (!to.IsZero() && !a.start.Before(to)) {
			continue
		}
		s.posts++
		switch a.status {
		case http.StatusOK:
			s.ok++
		case http.StatusServiceUnavailable:
			s.unavailable++
			if a.retryAfter == "" {
				s.noRetryAfter++
			}
		case 0:
			s.connErrors++
		}
		if a.redelivery {
			s.redeliveries++
		}
		if a.end.Sub(a.start) > time.Second {
			s.slow++
		}
	}
	return s
}

// within returns the attempts that started at or after from and ended
// before to.
func (l *load) within(from, to time.Time) []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []attempt
	for _, a := range l.attempts {
		if !a.start.Before(from) && a.end.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// inFlightAt counts the attempts that started before ts and ended after.
func (l *load) inFlightAt(ts time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.attempts {
		if a.start.Before(ts) && a.end.After(ts) {
			n++
		}
	}
	return n
}

// waitPosts waits until n more attempts than now have completed, so a
// fault is injected while the load is demonstrably running.
func (l *load) waitPosts(t testing.TB, n int, d time.Duration) {
	t.Helper()
	l.mu.Lock()
	want := len(l.attempts) + n
	l.mu.Unlock()
	waitFor(t, fmt.Sprintf("%d more posts", n), d, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.attempts) >= want
	})
}

// newest returns, per subject, the acknowledged event with the latest
// occurred_at.
func (l *load) newest() map[string]*loadEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]*loadEvent{}
	for _, ev := range l.events {
		if !l.acked[ev.key] {
			continue
		}
		if cur := out[ev.subject]; cur == nil || ev.occurred.After(cur.occurred) {
			out[ev.subject] = ev
		}
	}
	return out
}
