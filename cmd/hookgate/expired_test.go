package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// Events a gateway-only serve stored and nothing applied before they left
// WEBHOOKS at max_age are lost; the serve that consumes next says so: an
// error line, hookgate_consumer_events_expired_total, and an AUDIT record
// expired-unapplied naming the sequences (before, nothing did).
func TestServeTellsEventsExpiredUnapplied(t *testing.T) {
	dataDir := t.TempDir()
	cfg := func(roles string) string {
		path := filepath.Join(t.TempDir(), "hookgate.yaml")
		yaml := fmt.Sprintf(`http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q } }
roles: %s
dedup: { horizon: 1s, window: 1s }
retention: { webhooks: { max_age: 2s } }
%s`, dataDir, roles, review6Provider)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	body := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"grant_id":"G-%s","at":"2026-01-01T00:00:00Z"}`, id, id)
	}
	both, gatewayOnly := cfg("{ gateway: true, consumer: true }"), cfg("{ gateway: true, consumer: false }")

	s := review7Start(t, both, true)
	if code := review6Post(t, s.base, body("1")); code != 200 {
		t.Fatalf("post 1: %d", code)
	}
	aoWaitMetrics(t, s.base, "event 1 applied", func(b string) bool {
		return strings.Contains(b, `hookgate_consumer_events_total{decision="applied",provider="p"} 1`)
	})
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}

	g := review7Start(t, gatewayOnly, true)
	for _, id := range []string{"2", "3"} {
		if code := review6Post(t, g.base, body(id)); code != 200 {
			t.Fatalf("post %s: %d", id, code)
		}
	}
	if err := g.stop(t); err != nil {
		t.Fatal(err)
	}
	// max_age is enforced by the server while it runs: wait for 2 and 3
	// to leave through a system of the test's own (no consumer).
	sys := review9Open(t, gatewayOnly)
	for end := time.Now().Add(20 * time.Second); ; {
		st, err := sys.conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().State.FirstSeq > 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("WEBHOOKS still holds seq 3 after 20 s: %+v", st.CachedInfo().State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sys.Close()

	s = review7Start(t, both, true)
	// WEBHOOKS is empty: the loss is told at the next delivery (told at
	// the open, it was told again at every restart until an event came).
	if code := review6Post(t, s.base, body("4")); code != 200 {
		t.Fatalf("post 4: %d", code)
	}
	aoWaitMetrics(t, s.base, "the expired events counted", func(b string) bool {
		return strings.Contains(b, "hookgate_consumer_events_expired_total 2")
	})
	if log := s.stderr.String(); !strings.Contains(log, "before they were applied: they are lost") || !strings.Contains(log, `"first_seq":2,"last_seq":3,"events":2`) {
		t.Errorf("serve's log does not tell the lost events:\n%s", tail(log, 3000))
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	// status lists it among its problems (from AUDIT: the metric is
	// gone with the process).
	r := review9Run(t, "", "status", "--config", both)
	if !strings.Contains(r.stdout, "events lost to WEBHOOKS' max_age, told ") || !strings.Contains(r.stdout, "WEBHOOKS seq 2-3 (2 events) left the stream") {
		t.Errorf("status does not list the lost events among its problems: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// trace of a lost event's key ends with the record that says so, not
	// at "accepted" (the record names no key: it is found by sequence).
	r = review9Run(t, "", "trace", "p:default:evt:2", "--config", both)
	if !strings.Contains(r.stdout, "expired-unapplied") || !strings.Contains(r.stdout, "WEBHOOKS seq 2-3 (2 events) left the stream") {
		t.Errorf("trace of a lost event does not say it was lost: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = review9Run(t, "", "trace", "p:default:evt:1", "--config", both); strings.Contains(r.stdout, "expired-unapplied") {
		t.Errorf("trace of the applied event 1 names the loss of 2-3:\n%s", r.stdout)
	}
	sys = review9Open(t, both)
	defer sys.Close()
	var records []event.AuditRecord
	if err := jetstream.Read(t.Context(), sys.conn, jetstream.StreamAudit, jetstream.Range{Filter: "audit." + event.DecisionExpiredUnapplied + ".>"}, func(m jetstream.StoredMsg, _ uint64) error {
		rs, err := event.AuditRecords(m.Body)
		records = append(records, rs...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 || records[0].Seq != 2 || records[0].Actor != event.ActorConsumer ||
		!strings.Contains(records[0].Reason, "WEBHOOKS seq 2-3 (2 events) left the stream at its max_age") {
		t.Fatalf("AUDIT expired-unapplied records: %+v", records)
	}
}
