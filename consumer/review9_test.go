package consumer_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// storeAs stores an event of provider as the gateway would.
func storeAs(t testing.TB, env *jstest.Env, provider, key, subject, occurred string) {
	t.Helper()
	h := nats.Header{}
	h.Set(event.HeaderKey, key)
	h.Set(event.HeaderProvider, provider)
	h.Set(event.HeaderAccount, "default")
	h.Set(event.HeaderReceivedAt, time.Now().UTC().Format(time.RFC3339Nano))
	h.Set(event.HeaderSubject, subject)
	h.Set(event.HeaderOccurredAt, occurred)
	h.Set(event.HeaderType, "t")
	h.Set("Content-Type", "application/json")
	body := fmt.Sprintf(`{"id":%q,"grant_id":%q,"occurred_at":%q}`, key, subject, occurred)
	p := jetstream.NewPublisher(env.Conn, 5*time.Second)
	if _, err := p.Publish(t.Context(), jetstream.Message{Subject: "webhooks." + provider + ".default", Key: key, Header: h, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// A dead letter for an unparseable occurred_at must say why (the contract:
// "dead-lettered at once with the reason"). ParseOccurredAt explains each
// rejection and hints at the usual mistake, Unix milliseconds (what
// JavaScript's Date.now() gives), but prepare discards its error and the
// letter only quotes the value back.
func TestReview9UnparseableOccurredAtLetterSaysWhy(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	storeAs(t, env, "grants", "k-millis", "G-1", "1732960800000")
	storeAs(t, env, "grants", "k-leap", "G-2", "2016-12-31T23:59:61Z")
	start(t, env, newProcessor(env, "a", true, audit), 2)
	waitSettled(t, env)

	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k-millis": "milliseconds", "k-leap": "out of range"}
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		key, reason := m.Header.Get(event.HeaderKey), m.Header.Get(event.HeaderDlqReason)
		if !strings.Contains(reason, want[key]) {
			t.Errorf("letter for %s: reason %q does not say why (want it to mention %q, as ParseOccurredAt's error does)", key, reason, want[key])
		}
	}
}

// RFC 3339 (section 5.6 grammar, section 5.8 examples) allows a leap second,
// and the contract says occurred_at accepts RFC 3339; an event stamped
// with one (as a provider using a leap-second-aware clock writes it) is
// dead-lettered at once under ordering: watermark.
func TestReview9LeapSecondIsRFC3339(t *testing.T) {
	for _, raw := range []string{"1990-12-31T23:59:60Z", "1990-12-31T15:59:60-08:00", "2016-12-31T23:59:60.5Z"} {
		got, err := consumer.ParseOccurredAt(raw)
		if err != nil {
			t.Errorf("ParseOccurredAt(%q): %v; RFC 3339 section 5.8 gives this form as valid", raw, err)
			continue
		}
		before := time.Date(1990, 12, 31, 23, 59, 59, 0, time.UTC)
		if strings.HasPrefix(raw, "2016") {
			before = time.Date(2016, 12, 31, 23, 59, 59, 0, time.UTC)
		}
		if !got.After(before) && !got.Equal(before) {
			t.Errorf("ParseOccurredAt(%q) = %v, before the second it follows", raw, got)
		}
	}
}

// A 4xx from the forward target is dead-lettered at once: one POST. When
// the dead-letter write fails (DLQ full: it discards new), the consumer
// retries the whole event in place and then every second at its subject's
// head, running the forward again each time, with no backoff and no bound
// (those runs count for neither consumer.max_deliver nor the backoff). A
// full DLQ turns every permanently failing event into a request a second
// against a receiver that already refused it.
func TestReview9FailedDeadLetterWriteDoesNotReRunForward(t *testing.T) {
	streams := jstest.Streams()
	streams.DLQ.MaxBytes = 64 // full: no letter fits
	env := jstest.StartWith(t, "", streams)
	fwd, hits := countingForward(t, http.StatusUnprocessableEntity)
	storeAs(t, env, "grants", "k-refused", "G-1", "2026-11-30T10:00:00Z")
	start(t, env, newProcessor(env, "a", true, &auditLog{}, fwd), 1)

	// Watch for 20 s (the in-place retries take ~6 s, then a run a second);
	// fail as soon as the forward ran more often than max_deliver allows.
	start := time.Now()
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := hits.Load(); n > 3 {
			t.Fatalf("forward POSTed %d times in %s for one event its target answered 422 (dead-letter at once; max_deliver 3): "+
				"each failed DLQ write re-ran the effects", n, time.Since(start).Round(100*time.Millisecond))
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("forward POSTed %d times, want 1", n)
	}
}
