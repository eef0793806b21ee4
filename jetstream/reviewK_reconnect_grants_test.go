package jetstream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
)

type reviewKNopAudit struct{}

func (reviewKNopAudit) Record(event.AuditRecord) {}

// TestReviewKGrantsPublishRidesOutReconnect: hookgate's connection to its
// NATS server drops while an event's forward runs (the server it was
// connected to died; on a cluster nats.go then dials the next node), and
// the GRANTS publish that follows meets the connection still
// reconnecting. Connect buffers nothing while reconnecting
// (ReconnectBufSize -1), so nats.go refuses the publish at once with
// "outbound buffer limit exceeded", an error Publisher does not retry
// (publisher.go retryable), although it rides out timeouts and leader
// changes for up to 20 s (grantPublishLimit). The consumer takes it for
// an effect failure (lease.go applyLeased -> retry.go failed): one of
// consumer.max_deliver attempts is spent, the forward runs again after the
// backoff, and on the last attempt the event is dead-lettered, for a
// reconnect of under a second. The user expects infrastructure trouble
// never to count as an attempt (as a WATERMARKS or DLQ write's does not).
func TestReviewKGrantsPublishRidesOutReconnect(t *testing.T) {
	for _, tc := range []struct {
		maxDeliver int
		want       string
	}{
		{8, consumer.Applied},
		{1, consumer.Applied},
	} {
		t.Run(fmt.Sprintf("max_deliver=%d", tc.maxDeliver), func(t *testing.T) {
			srv := startTCPServer(t)
			c := srv.c
			ctx := t.Context()
			marks, applied, err := ProvisionKV(ctx, c.JS, KVConfig{Replicas: 1, Horizon: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			fx := NewEffects(c)
			reconnecting := false
			restarted := make(chan struct{})
			// The forward: on its first run the server goes away, and comes
			// back once the client is reconnecting (as after a node's death
			// on a cluster, where another node takes the connection).
			forward := consumer.EffectFunc(func(ctx context.Context, ev consumer.Event) error {
				if reconnecting {
					return nil
				}
				srv.shutdown()
				for end := time.Now().Add(10 * time.Second); !c.NC.IsReconnecting(); time.Sleep(time.Millisecond) {
					if time.Now().After(end) {
						return fmt.Errorf("client not reconnecting")
					}
				}
				reconnecting = true
				go func() {
					defer close(restarted)
					if err := srv.restart(); err != nil {
						t.Error(err)
					}
				}()
				return nil
			})
			rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{
				forward, consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx}}}}
			var logs bytes.Buffer
			var logMu sync.Mutex
			log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			proc := consumer.NewProcessor(rules, marks, applied, fx, reviewKNopAudit{}, log, nil,
				consumer.Options{Owner: "me", MaxDeliver: tc.maxDeliver, Backoff: []time.Duration{time.Second}, LeaseTTL: time.Minute})
			h := http.Header{}
			h.Set(event.HeaderKey, "grants:default:evt:k1")
			ev := consumer.Event{Key: "grants:default:evt:k1", Provider: "grants", Account: "default", Subject: "G-1", Type: "t",
				OccurredRaw: "2026-11-30T10:00:00Z", OccurredAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Seq: 1, Header: h, Body: []byte(`{}`)}
			out := proc.ProcessOnce(ctx, ev, 1)
			select {
			case <-restarted:
			case <-time.After(30 * time.Second):
				// The forward failed before the fault (review AG: this
				// waited for good).
				t.Fatalf("the fault did not hit: the server never restarted during the forward (outcome %+v)", out)
			}
			if !reconnecting {
				t.Fatal("the fault did not hit: the connection never dropped during the forward")
			}
			logMu.Lock()
			lines := logs.String()
			logMu.Unlock()
			var why []string
			for _, l := range strings.Split(lines, "\n") {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					why = append(why, l)
				}
			}
			t.Logf("decision %q, reason %q\n%s", out.Decision, out.Reason, strings.Join(why, "\n"))
			if out.Decision != tc.want {
				t.Errorf("a reconnect of the consumer's connection during the forward: decision %q (%s); want %q, the GRANTS publish riding out the reconnect as it rides out a leader change",
					out.Decision, out.Reason, tc.want)
			}
		})
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
