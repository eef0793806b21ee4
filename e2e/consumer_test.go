package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	js "github.com/nats-io/nats.go/jetstream"
)

// grantsKeys returns "subject key" for every GRANTS message, in order.
func grantsKeys(t testing.TB, j js.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "GRANTS")
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Subject+" "+m.Header.Get("Hookgate-Key"))
	}
	return out
}

// The fourth check of a store-first idempotency gate, through HTTP: a
// stale replay (an older "submitted" after "approved") is dropped, a new
// event on the same grant is applied, and two events at the same instant
// both apply.
func TestConsumerStaleReplayDroppedThroughHTTP(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	url := hg.baseURL + "/webhooks/grants"
	send := func(id, typ, at string) {
		t.Helper()
		body := []byte(`{"grant_id":"G-42","type":"` + typ + `","occurred_at":"` + at + `"}`)
		expect(t, post(t, url, signGrants(t, id, body), body), 200, "status", "accepted")
	}
	waitGrants := func(n int) []string {
		t.Helper()
		var g []string
		waitFor(t, "GRANTS to hold the applied events", 30*time.Second, func() bool {
			g = grantsKeys(t, j)
			return len(g) >= n
		})
		return g
	}

	send("msg_approved", "application.approved", "2026-11-30T11:00:00Z")
	waitGrants(1)
	// The portal replays an older event (its retry of "submitted").
	send("msg_submitted", "application.submitted", "2026-11-30T10:00:00Z")
	// A new event on the same grant, and two at one instant.
	send("msg_amended", "application.amended", "2026-11-30T12:00:00Z")
	send("msg_award_a", "award.disbursed", "2026-11-30T13:00:00Z")
	send("msg_award_b", "award.disbursed", "2026-11-30T13:00:00Z")
	waitGrants(4)

	// The stale one is decided (recorded in AUDIT) and never published.
	waitFor(t, "the stale decision in AUDIT", 30*time.Second, func() bool {
		return auditHas(t, j, "stale", "grants:default:evt:msg_submitted")
	})
	want := []string{
		"grants.grants.G-42.application.approved grants:default:evt:msg_approved",
		"grants.grants.G-42.application.amended grants:default:evt:msg_amended",
		"grants.grants.G-42.award.disbursed grants:default:evt:msg_award_a",
		"grants.grants.G-42.award.disbursed grants:default:evt:msg_award_b",
	}
	if got := grantsKeys(t, j); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("GRANTS:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	kv, err := j.KeyValue(context.Background(), "WATERMARKS")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(context.Background(), "grants.default.G-42")
	if err != nil {
		t.Fatal(err)
	}
	var mark struct {
		At   time.Time `json:"at"`
		Keys []string  `json:"keys"`
	}
	if err := json.Unmarshal(entry.Value(), &mark); err != nil {
		t.Fatal(err)
	}
	if !mark.At.Equal(time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)) || len(mark.Keys) != 2 {
		t.Fatalf("watermark = %s %v; want 13:00 with both award keys", mark.At, mark.Keys)
	}
}

// auditHas reports whether AUDIT holds a record with decision for key.
func auditHas(t testing.TB, j js.JetStream, decision, key string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "AUDIT")
	if err != nil {
		return false
	}
	info, err := s.Info(ctx)
	if err != nil {
		return false
	}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		recs, _ := event.AuditRecords(m.Data)
		for _, r := range recs {
			if r.Decision == decision && r.Key == key {
				return true
			}
		}
	}
	return false
}

// Long extracted values (1 KiB each, tripled by the token escapes) once
// built a GRANTS subject past NATS's 4096-byte protocol line: the server
// closed the consumer's connection, serve exited, and the redelivered
// event took it down again after every restart. Tokens are bounded now:
// the event applies and hookgate keeps serving.
func TestConsumerSurvivesLongExtractedValues(t *testing.T) {
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	url := hg.baseURL + "/webhooks/grants"
	subject, level := strings.Repeat("é", 500), strings.Repeat("é", 250) // 1000 bytes each way, 3000 encoded
	body := []byte(`{"grant_id":"` + subject + `","type":"` + level + `.` + level + `","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "msg_long", body), body), 200, "status", "accepted")
	normal := []byte(`{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "msg_normal", normal), normal), 200, "status", "accepted")
	waitFor(t, "both events applied", 30*time.Second, func() bool { return len(grantsKeys(t, j)) == 2 })
	select {
	case <-hg.done:
		t.Fatalf("hookgate exited:\n%s", hg.stderr.String())
	default:
	}
	expect(t, post(t, url, signGrants(t, "msg_after", normal), normal), 200, "status", "accepted")
}
