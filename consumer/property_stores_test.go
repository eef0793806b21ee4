package consumer_test

// The ports TestProcessorProperty runs the processor on: GRANTS and DLQ
// recorders, and stores that let the world watch and interleave calls.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
)

// grantsRecorder is GRANTS: every call counted, the content deduplicated
// by key as the stream does by Nats-Msg-Id.
type grantsRecorder struct{ w *world }

func (g grantsRecorder) PublishGrant(ctx context.Context, subject, key string, _ http.Header, _ []byte) (uint64, error) {
	w := g.w
	s, mk := w.specs[key], w.specs[key].exclusive()
	defer w.publishing(mk, key)()
	w.clock++
	w.calls[key]++
	d := w.dels[deliveryOf(ctx)]
	// A second publication of a key is legitimate only as the rerun of a
	// delivery that crashed after its effects, or whose publish answer was
	// lost (GRANTS deduplicates it).
	if reruns := w.crashedAfterEffects(key) + w.lostAnswers[key]; w.calls[key] > 1+reruns && !w.tolerated(knownNoneRerun, d) {
		w.violatef("%s published %d times with %d crashes after its effects", key, w.calls[key], reruns)
	}
	if _, ok := w.published[key]; ok {
		return uint64(w.published[key]), nil
	}
	w.checkWatermarkOrder(s, mk)
	w.published[key] = w.clock
	if err := w.loseAnswer(d, subject, false); err != nil {
		return 0, err
	}
	return uint64(w.clock), nil
}

// How a delivery's publish answer is lost (delivery.lose): the message is
// stored, and the answer to the publish never comes back. jetstream's
// Publisher then retries with the same Nats-Msg-Id (publisher.go): within
// the duplicate window the retry is answered duplicate with the stored
// sequence, which is a plain success; past it, a sequenced publish's
// retry is refused by the expected last sequence, now the lost message's
// (loseRefused; grants_sequenced.go), and the caller must find its own
// message by reading. When no answer comes back until grantPublishLimit
// (a connection down right after the write), the publish fails with
// jetstream's ErrUnavailable and a deadline exceeded (loseTimeout), an
// effect failure to the processor, though its message is in GRANTS.
const (
	loseRefused = "refused"
	loseTimeout = "timeout"
)

// errLostTimeout stands for jetstream.ErrUnavailable (this package does
// not import jetstream, which imports it).
var errLostTimeout = errors.New("jetstream unavailable")

// loseAnswer loses the answer of d's publish, just stored, as d planned
// (once per delivery), and returns the error the publisher would; nil
// when the answer arrives. Under w.mu.
func (w *world) loseAnswer(d *delivery, subject string, sequenced bool) error {
	if d == nil || d.lose == "" || d.lost || (d.lose == loseRefused && !sequenced) {
		// A refused retry needs an expected sequence: elsewhere the
		// retry is a duplicate, answered like a first publish.
		return nil
	}
	d.lost = true
	w.tracef("%s: answer of the publish of %s lost (%s)", d.owner, d.spec.key, d.lose)
	if d.lose == loseRefused {
		return fmt.Errorf("publish %s after ?: %w: nats: wrong last sequence", subject, consumer.ErrGrantMoved)
	}
	err := fmt.Errorf("publish %s: %w: %w (last error: nats: timeout)", subject, errLostTimeout, context.DeadlineExceeded)
	w.lostAnswers[d.spec.key]++
	w.failed[d.msg.seq]++ // an effect failure, counted as an attempt
	d.effectErr = err
	return err
}

// publishing marks a GRANTS publish of key as an effect of its subject
// (mk) running, and takes the world's lock; the returned func undoes both.
func (w *world) publishing(mk, key string) (done func()) {
	w.enter(mk, key)
	time.Sleep(time.Millisecond)
	w.mu.Lock()
	return func() {
		w.mu.Unlock()
		w.leave(mk)
	}
}

// checkWatermarkOrder: effects are emitted in watermark order, nothing
// older than what GRANTS already has for the subject. Under w.mu.
func (w *world) checkWatermarkOrder(s spec, mk string) {
	if s.provider != provWatermark {
		return
	}
	for k := range w.published {
		if o := w.specs[k]; o.markKey() == mk && o.at.After(s.at) && !w.inDoubtNewer(o) {
			w.violatef("%s (%s) published after %s (%s) of the same subject: not in watermark order", s.key, fmtAt(s), k, fmtAt(o))
		}
	}
}

// grantsSequenced is GRANTS as jetstream.Effects is to a rule that
// publishes the sequenced way (consumer/sequenced.go): messages kept per
// subject, a publish stored only when the subject's last message is the
// one expected, and no duplicate window at all (the real one is 100 ms):
// a key stored twice is a violation, crash or no crash.
type grantsSequenced struct{ grantsRecorder }

func (g grantsSequenced) PublishGrantAfter(ctx context.Context, subject, key string, last uint64, h http.Header, _ []byte) (uint64, error) {
	w := g.w
	s, mk := w.specs[key], w.specs[key].exclusive()
	defer w.publishing(mk, key)()
	msgs := w.grantMsgs[subject]
	if top := lastSeq(msgs); top != last {
		return 0, fmt.Errorf("expected last %d, is %d: %w", last, top, consumer.ErrGrantMoved)
	}
	if _, ok := w.published[key]; ok {
		w.violatef("%s stored in GRANTS a second time (on %s)", key, subject)
	}
	w.checkWatermarkOrder(s, mk)
	w.clock++
	w.calls[key]++
	w.published[key] = w.clock
	w.grantMsgs[subject] = append(msgs, consumer.GrantMsg{Seq: uint64(w.clock), Key: key, Header: h.Clone()})
	if err := w.loseAnswer(w.dels[deliveryOf(ctx)], subject, true); err != nil {
		return 0, err
	}
	return uint64(w.clock), nil
}

func lastSeq(msgs []consumer.GrantMsg) uint64 {
	if len(msgs) == 0 {
		return 0
	}
	return msgs[len(msgs)-1].Seq
}

func (g grantsSequenced) LastGrant(ctx context.Context, subject string) (uint64, error) {
	g.w.pause(ctx)
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	return lastSeq(g.w.grantMsgs[subject]), nil
}

func (g grantsSequenced) ScanGrants(ctx context.Context, subject string, after uint64, _ time.Time, upTo uint64, fn func(consumer.GrantMsg)) error {
	g.w.pause(ctx)
	g.w.mu.Lock()
	msgs := slices.Clone(g.w.grantMsgs[subject])
	g.w.mu.Unlock()
	for _, m := range msgs {
		if m.Seq > after && m.Seq <= upTo {
			fn(m)
		}
	}
	return nil
}

func (g grantsSequenced) HasGrant(ctx context.Context, subject, key string, _ time.Time) (bool, error) {
	return grantsIndexed(g).HasGrant(ctx, subject, key, time.Time{})
}

// grantsIndexed is grantsRecorder that also says which keys GRANTS holds,
// as jetstream.Effects does: the watermark rule then remembers applied
// keys there.
type grantsIndexed struct{ grantsRecorder }

func (g grantsIndexed) HasGrant(ctx context.Context, subject, key string, _ time.Time) (bool, error) {
	w := g.w
	w.pause(ctx)
	if err := ctx.Err(); err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.specs[key]
	_, ok := w.published[key]
	if want := "grants." + s.provider + "." + event.Token(s.subject) + "."; ok && !strings.HasPrefix(subject, want) {
		w.violatef("%s looked up on %s, published on %s...", key, subject, want)
	}
	return ok, nil
}

type letterRecorder struct{ w *world }

func (l letterRecorder) DeadLetter(ctx context.Context, ev consumer.Event, reason string, deliveries int) (uint64, error) {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.letters[ev.Key]++
	if d := w.dels[deliveryOf(ctx)]; d != nil && deliveries != d.msg.deliveries {
		w.violatef("%s dead-lettered with deliveries %d, delivery was %d", ev.Key, deliveries, d.msg.deliveries)
	}
	return uint64(w.letters[ev.Key]), nil
}

type nopAuditor struct{}

func (nopAuditor) Record(event.AuditRecord) {}

// pause delays the delivery's next store call as drawn.
func (w *world) pause(ctx context.Context) {
	w.mu.Lock()
	var p time.Duration
	if d := w.dels[deliveryOf(ctx)]; d != nil && len(d.pauses) > 0 {
		p, d.pauses = d.pauses[0], d.pauses[1:]
	}
	w.mu.Unlock()
	if p > 0 {
		time.Sleep(p)
	}
}

// observedMarks lets the world see which delivery read which mark, and
// interleave racing deliveries.
type observedMarks struct{ w *world }

func (o observedMarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	o.w.pause(ctx)
	m, rev, err := o.w.marks.Get(ctx, key)
	if err == nil {
		o.w.mu.Lock()
		if d := o.w.dels[deliveryOf(ctx)]; d != nil {
			d.read = &m
		}
		o.w.mu.Unlock()
	}
	return m, rev, err
}

func (o observedMarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	o.w.pause(ctx)
	// A delivery that claims on a mark it did not read in this delivery
	// (the processor's cache) decided on the mark this compare-and-set
	// replaces: record that one when the write succeeds.
	prev, prevRev, perr := o.w.marks.Get(ctx, key)
	n, err := o.w.marks.Put(ctx, key, m, rev)
	if err == nil && perr == nil && prevRev == rev {
		o.w.mu.Lock()
		if d := o.w.dels[deliveryOf(ctx)]; d != nil && d.read == nil {
			d.read = &prev
		}
		o.w.mu.Unlock()
	}
	return n, err
}

// observedApplied interleaves racing deliveries' APPLIED calls.
type observedApplied struct{ w *world }

func (o observedApplied) Seen(ctx context.Context, key string) (bool, error) {
	o.w.pause(ctx)
	return o.w.applied.Seen(ctx, key)
}

func (o observedApplied) Remember(ctx context.Context, key string) error {
	o.w.pause(ctx)
	return o.w.applied.Remember(ctx, key)
}

// observePut runs under the store's lock for every successful Put, in
// revision order: the watermark never moves backwards, at one instant keys
// are only added, and nobody takes a lease another owner still holds.
func (w *world) observePut(ctx context.Context, key string, prev, next consumer.Mark) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.dels[deliveryOf(ctx)]; d != nil {
		d.wrote = &next
	}
	w.committed[key] = next
	switch {
	case next.At.Before(prev.At):
		w.violatef("watermark %s moved backwards: %s -> %s", key, fmtMark(prev), fmtMark(next))
	case next.At.Equal(prev.At):
		for _, k := range prev.Keys {
			if !slices.Contains(next.Keys, k) {
				w.violatef("watermark %s dropped %s at the same instant: %s -> %s", key, k, fmtMark(prev), fmtMark(next))
			}
		}
	}
	if l, p := next.Lease, prev.Lease; l != nil && p != nil && l.Owner != p.Owner && time.Now().Before(p.Until) {
		w.violatef("watermark %s: %s took the lease %s holds until %s", key, l.Owner, p.Owner, p.Until.Format(time.TimeOnly))
	}
}

// fakeDelivery is the ack handle: it counts, so checkDecision can hold
// each outcome to exactly one ack (or one nak, or neither for a crash).
type fakeDelivery struct {
	w *world
	d *delivery
}

func (f fakeDelivery) Ack(context.Context) error {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.d.acks++
	return nil
}

func (f fakeDelivery) NakWithDelay(time.Duration) error {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.d.naks++
	return nil
}

func (f fakeDelivery) InProgress() error { return nil }
