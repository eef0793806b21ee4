package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// storedMsg is one message read back from a stream.
type storedMsg struct {
	seq    uint64
	header nats.Header
	data   []byte
}

// scanStream reads every message of stream up to its last sequence at the
// time of the call, with an ordered consumer.
func scanStream(t testing.TB, j js.JetStream, stream string) []storedMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	last := info.State.LastSeq
	cons, err := s.OrderedConsumer(ctx, js.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	var out []storedMsg
	for ctx.Err() == nil {
		batch, err := cons.Fetch(500, js.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				t.Fatalf("read %s: %v", stream, err)
			}
			if meta.Sequence.Stream > last {
				return out
			}
			out = append(out, storedMsg{seq: meta.Sequence.Stream, header: m.Headers(), data: m.Data()})
			if meta.Sequence.Stream == last {
				return out
			}
		}
	}
	t.Fatalf("read %s: got %d messages up to seq %d before the deadline", stream, len(out), last)
	return nil
}

// waitSettled waits until the durable consumer has acknowledged every
// message stored in WEBHOOKS: nothing pending, nothing awaiting an ack.
func waitSettled(t testing.TB, j js.JetStream, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	end := start.Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok := func() bool {
			s, err := j.Stream(ctx, "WEBHOOKS")
			if err != nil {
				last = err.Error()
				return false
			}
			si, err := s.Info(ctx)
			if err != nil {
				last = err.Error()
				return false
			}
			c, err := s.Consumer(ctx, "hookgate-apply")
			if err != nil {
				last = err.Error()
				return false
			}
			ci, err := c.Info(ctx)
			if err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("stream last seq %d; consumer ack floor %d, pending %d, ack pending %d, redelivered %d",
				si.State.LastSeq, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
			return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream == si.State.LastSeq
		}()
		cancel()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(end) {
			t.Fatalf("consumer hookgate-apply not settled after %s: %s", d, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAuditHasLoggedDecisions waits until AUDIT holds a record for every
// decision (applied, stale, dead-lettered) a hookgate process logged,
// except those of a process killed with SIGKILL (its queued records may
// be lost, by design) and those whose loss the process logged ("audit
// write failed", counted in the metric). So decisions reach AUDIT under
// the test's faults: it waits for that state, not for a lull.
func waitAuditHasLoggedDecisions(t testing.TB, j js.JetStream, procs []*hgProc, d time.Duration) {
	t.Helper()
	type decision struct{ key, decision string }
	want := map[decision]bool{}
	for _, p := range procs {
		if p.killedHard() {
			continue
		}
		logged, lost, lostAtStop := map[decision]bool{}, map[string]bool{}, false
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Key, Decision string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case "event":
				if line.Decision == "applied" || line.Decision == "stale" || line.Decision == "dead-lettered" {
					logged[decision{line.Key, line.Decision}] = true
				}
			case "audit write failed":
				lost[line.Key] = true
			case "audit records lost at shutdown":
				lostAtStop = true
			}
		}
		if lostAtStop {
			continue
		}
		for dec := range logged {
			if !lost[dec.key] {
				want[dec] = true
			}
		}
	}
	var missing []string
	for end := time.Now().Add(d); ; time.Sleep(500 * time.Millisecond) {
		have := map[decision]bool{}
		for _, m := range scanStream(t, j, "AUDIT") {
			recs, err := event.AuditRecords(m.data)
			if err != nil {
				t.Fatalf("AUDIT seq %d is not JSON lines: %v", m.seq, err)
			}
			for _, rec := range recs {
				have[decision{rec.Key, rec.Decision}] = true
			}
		}
		missing = missing[:0]
		for dec := range want {
			if !have[dec] {
				missing = append(missing, dec.decision+" "+dec.key)
			}
		}
		if len(missing) == 0 {
			t.Logf("all %d decisions logged by processes not killed are in AUDIT", len(want))
			return
		}
		if time.Now().After(end) {
			sort.Strings(missing)
			t.Fatalf("%d of %d logged decisions not in AUDIT after %s, e.g. %v", len(missing), len(want), d, firstN(missing, 5))
		}
	}
}

// forwardReceiver is a forward target that records every delivery.
type forwardReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	// byEvent maps the event id in the body to the Idempotency-Key of
	// each delivery of it.
	byEvent map[string][]string
	total   int
}

func newForwardReceiver(t testing.TB) *forwardReceiver {
	f := &forwardReceiver{byEvent: map[string][]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ID == "" {
			http.Error(w, "no id", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.byEvent[body.ID] = append(f.byEvent[body.ID], r.Header.Get("Idempotency-Key"))
		f.total++
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// reconciliation is the end-of-test account of one failure test.
type reconciliation struct {
	sent, posts, acked, redeliveries int
	stored, storedKeys               int
	applied, stale, deadLettered     int
	staleUnrecorded, unexplained     int
	forwarded, forwardedKeys         int
	settle                           time.Duration
	decisionsLogged                  int
	appliedJudgedStale               []string       // in GRANTS, yet a later delivery was judged stale
	warnings                         map[string]int // hookgate WARN/ERROR log lines by message
}

func (r reconciliation) table() string {
	var b strings.Builder
	b.WriteString("\n| sent | posts | redeliveries | acknowledged | stored (msgs/keys) | applied | stale | dead-lettered | unexplained |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	stale := fmt.Sprint(r.stale)
	if r.staleUnrecorded > 0 {
		stale = fmt.Sprintf("%d (%d without a record)", r.stale, r.staleUnrecorded)
	}
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d/%d | %d | %s | %d | %d |\n",
		r.sent, r.posts, r.redeliveries, r.acked, r.stored, r.storedKeys, r.applied, stale, r.deadLettered, r.unexplained)
	if len(r.appliedJudgedStale) > 0 {
		fmt.Fprintf(&b, "in GRANTS, then judged stale on a later delivery (counted as applied): %d %v\n",
			len(r.appliedJudgedStale), firstN(r.appliedJudgedStale, 5))
	}
	if r.forwarded > 0 {
		fmt.Fprintf(&b, "forward receiver: %d deliveries of %d distinct keys\n", r.forwarded, r.forwardedKeys)
	}
	fmt.Fprintf(&b, "consumer settled %s after the load stopped; %d consumer decisions logged", r.settle.Round(100*time.Millisecond), r.decisionsLogged)
	if len(r.warnings) > 0 {
		keys := make([]string, 0, len(r.warnings))
		for k := range r.warnings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("\nhookgate warnings and errors:")
		for _, k := range keys {
			fmt.Fprintf(&b, "\n  %5d %s", r.warnings[k], k)
		}
	}
	return b.String()
}

// reconcileOptions says what the test did, so the reconciliation knows
// which differences are explained.
type reconcileOptions struct {
	// procs are every hookgate process that ran; their logs hold the
	// consumer decisions made up to a kill.
	procs []*hgProc
	// consumersKilled: a consumer died with SIGKILL, so AUDIT records it
	// had queued may be lost (the audit writer is asynchronous by design).
	consumersKilled bool
	forward         *forwardReceiver
	settleWithin    time.Duration
}

// reconcile waits for the consumer to settle, reads WEBHOOKS, GRANTS, DLQ,
// AUDIT and WATERMARKS back, logs the table and fails on any difference
// the test does not explain.
func reconcile(t testing.TB, j js.JetStream, l *load, o reconcileOptions) reconciliation {
	t.Helper()
	stopped := time.Now()
	r := reconciliation{warnings: map[string]int{}}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("reconcile: "+format, args...)
	}

	// What the sender saw.
	l.mu.Lock()
	r.sent = len(l.events)
	r.posts = len(l.attempts)
	r.acked = len(l.acked)
	for _, a := range l.attempts {
		if a.redelivery {
			r.redeliveries++
		}
	}
	problems := slices.Clone(l.problems)
	gaveUp := slices.Clone(l.gaveUp)
	byKey := l.byKey
	acked := l.acked
	l.mu.Unlock()
	for _, p := range problems {
		fail("sender saw: %s", p)
	}
	if len(gaveUp) > 0 {
		fail("%d events never acknowledged (sender gave up after %s): %v", len(gaveUp), l.deadline, firstN(gaveUp, 5))
	}

	if o.settleWithin == 0 {
		o.settleWithin = 60 * time.Second
	}
	waitSettled(t, j, o.settleWithin)
	r.settle = time.Since(stopped)
	waitAuditHasLoggedDecisions(t, j, o.procs, 30*time.Second)

	// WEBHOOKS: every acknowledged key stored exactly once, nothing else.
	stored := map[string]int{}
	for _, m := range scanStream(t, j, "WEBHOOKS") {
		id, key := m.header.Get("Nats-Msg-Id"), m.header.Get("Hookgate-Key")
		if id != key {
			fail("WEBHOOKS seq %d: Nats-Msg-Id %q but Hookgate-Key %q", m.seq, id, key)
		}
		stored[id]++
		r.stored++
	}
	r.storedKeys = len(stored)
	for k, n := range stored {
		if n > 1 {
			fail("key %s stored %d times in WEBHOOKS", k, n)
		}
		if byKey[k] == nil {
			fail("WEBHOOKS holds %s, which the sender never sent", k)
		} else if !acked[k] {
			fail("WEBHOOKS holds %s, which was never acknowledged", k)
		}
	}
	for k := range acked {
		if stored[k] == 0 {
			fail("acknowledged %s is not in WEBHOOKS", k)
		}
	}

	// GRANTS: each key at most once, only stored keys.
	granted := map[string]int{}
	for _, m := range scanStream(t, j, "GRANTS") {
		k := m.header.Get("Nats-Msg-Id")
		granted[k]++
		if stored[k] == 0 {
			fail("GRANTS holds %s, which is not stored", k)
		}
	}
	for k, n := range granted {
		if n > 1 {
			fail("key %s applied %d times (GRANTS)", k, n)
		}
	}
	r.applied = len(granted)

	// DLQ: none expected, every event is valid and the effects recover.
	dead := map[string]string{}
	for _, m := range scanStream(t, j, "DLQ") {
		k := m.header.Get("Hookgate-Key")
		dead[k] = m.header.Get("Hookgate-Dlq-Reason")
	}
	r.deadLettered = len(dead)
	for k, reason := range dead {
		fail("valid event %s dead-lettered: %s", k, reason)
		if granted[k] > 0 {
			fail("key %s both applied and dead-lettered", k)
		}
	}

	// Stale decisions: AUDIT, and the consumers' own logs (written before a
	// kill could lose the queued audit record).
	staleRecorded := map[string]bool{}
	for _, m := range scanStream(t, j, "AUDIT") {
		recs, err := event.AuditRecords(m.data)
		if err != nil {
			fail("AUDIT seq %d is not JSON lines: %v", m.seq, err)
		}
		for _, rec := range recs {
			if rec.Decision == "stale" {
				staleRecorded[rec.Key] = true
			}
		}
	}
	for _, p := range o.procs {
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Level, Msg, Key, Decision, Error string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if line.Level == "WARN" || line.Level == "ERROR" {
				r.warnings[line.Level+" "+line.Msg]++
			}
			if line.Msg == "event" || strings.HasPrefix(line.Msg, "event dead-lettered") {
				r.decisionsLogged++
				if line.Decision == "stale" {
					staleRecorded[line.Key] = true
				}
			}
		}
	}

	// The final watermark of each subject, and its newest event applied.
	marks := readMarks(t, j)
	newest := l.newest()
	subjects := make([]string, 0, len(newest))
	for s := range newest {
		subjects = append(subjects, s)
	}
	sort.Strings(subjects)
	for _, s := range subjects {
		ev := newest[s]
		if granted[ev.key] == 0 {
			fail("subject %s: newest event %s (occurred %s) not applied", s, ev.key, ev.occurred.Format(time.RFC3339))
		}
		m, ok := marks[s]
		switch {
		case !ok:
			fail("subject %s: no WATERMARKS entry", s)
		case !m.At.Equal(ev.occurred):
			fail("subject %s: watermark %s, newest event occurred %s", s, m.At.Format(time.RFC3339), ev.occurred.Format(time.RFC3339))
		case !slices.Contains(m.Keys, ev.key):
			fail("subject %s: watermark keys %v lack the newest %s", s, m.Keys, ev.key)
		}
	}

	// applied + stale + dead-lettered == distinct stored keys.
	for k := range stored {
		switch {
		case granted[k] > 0:
			if staleRecorded[k] {
				// Its effects ran, then a redelivery found a newer watermark
				// and called it stale: GRANTS holds an event AUDIT says was
				// not applied.
				r.appliedJudgedStale = append(r.appliedJudgedStale, k)
				fail("key %s is in GRANTS but was judged stale on a later delivery", k)
			}
		case dead[k] != "":
		case staleRecorded[k]:
			r.stale++
			if ev := byKey[k]; ev != nil && !ev.occurred.Before(marks[ev.subject].At) {
				fail("key %s judged stale but occurred %s is not older than its subject's watermark %s", k, ev.occurred, marks[ev.subject].At)
			}
		default:
			// Acked by the consumer with no decision on record. Only a
			// killed consumer can lose its queued audit record and log
			// line; then the event must be older than its watermark.
			ev := byKey[k]
			if o.consumersKilled && ev != nil && ev.occurred.Before(marks[ev.subject].At) {
				r.stale++
				r.staleUnrecorded++
				continue
			}
			r.unexplained++
			fail("stored key %s neither applied, stale nor dead-lettered", k)
		}
	}
	if r.applied+r.stale+r.deadLettered != r.storedKeys {
		fail("applied %d + stale %d + dead-lettered %d != %d distinct stored keys", r.applied, r.stale, r.deadLettered, r.storedKeys)
	}

	if f := o.forward; f != nil {
		f.mu.Lock()
		r.forwarded = f.total
		r.forwardedKeys = len(f.byEvent)
		for id, keys := range f.byEvent {
			want := "grants:default:evt:" + id
			for _, k := range keys {
				if k != want {
					fail("forward of event %s carried Idempotency-Key %q, want %q", id, k, want)
				}
			}
			if stored[want] == 0 {
				fail("forwarded %s, which is not stored", want)
			}
			if granted[want] == 0 {
				fail("forwarded %s (%d times), which was not applied", want, len(keys))
			}
		}
		for k := range granted {
			if len(f.byEvent[strings.TrimPrefix(k, "grants:default:evt:")]) == 0 {
				fail("applied %s never reached the forward receiver", k)
			}
		}
		f.mu.Unlock()
		if r.forwardedKeys != r.applied {
			fail("forward receiver saw %d distinct keys, %d applied", r.forwardedKeys, r.applied)
		}
	}
	t.Log(r.table())
	return r
}

type markValue struct {
	At   time.Time `json:"at"`
	Keys []string  `json:"keys"`
}

// readMarks returns the WATERMARKS entries of the grants provider by
// subject.
func readMarks(t testing.TB, j js.JetStream) map[string]markValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := j.KeyValue(ctx, "WATERMARKS")
	if err != nil {
		t.Fatalf("WATERMARKS: %v", err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatalf("WATERMARKS keys: %v", err)
	}
	out := map[string]markValue{}
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("WATERMARKS %s: %v", k, err)
		}
		var m markValue
		if err := json.Unmarshal(e.Value(), &m); err != nil {
			t.Fatalf("WATERMARKS %s: %v", k, err)
		}
		out[strings.TrimPrefix(k, "grants.default.")] = m
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// count is how many deliveries the receiver has had.
func (f *forwardReceiver) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}
