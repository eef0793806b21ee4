package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReviewAVInterruptedRefeedLeavesNoLease: Ctrl-C (run's ctx
// cancelled, as main's signal.NotifyContext does) while `dlq replay` or
// `replay` forwards an event. The README says both stop "before the next
// letter" / "before the next event". What happens: the forward in flight
// is cut (context canceled), its lease on the subject is not given back
// (the release runs on the cancelled context), and the process exits. For
// serve that is a holder that stopped between claim and commit: every
// newer event of the subject waits for the lease (forward.timeout + 30 s)
// and then for the in-doubt event's redelivery (2 x that again), which
// never comes (the event is a letter in DLQ, not in the consumer's
// queue). With forward.timeout 10s that is 2 minutes; here (30s) 3. The
// operator who pressed Ctrl-C sees `subject waits for in-doubt event` in
// serve's log and the subject stuck, with nothing telling them why.
// (replay --redeliver gives its mark back at Ctrl-C since review AP; the
// apply path does not.)
func TestReviewAVInterruptedRefeedLeavesNoLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(seq string) []string
	}{
		{"dlq replay", func(string) []string { return []string{"dlq", "replay", "--all"} }},
		{"replay", func(string) []string { return []string{"replay", "--from-seq", "1", "--to-seq", "1"} }},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			var mode atomic.Int32 // 0: 400 (dead-lettered at once), 1: hold, 2: 204
			arrived := make(chan struct{}, 16)
			release := make(chan struct{})
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch mode.Load() {
				case 0:
					w.WriteHeader(http.StatusBadRequest)
					return
				case 1:
					arrived <- struct{}{}
					select {
					case <-release:
					case <-r.Context().Done():
					}
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer target.Close()
			defer close(release)
			dataDir, natsAddr := t.TempDir(), freeAddr(t)
			live := reviewAConfig(t, dataDir, natsAddr, "", fmt.Sprintf(`providers:
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
    effects: { forward: { url: %q, timeout: 30s } }
`, review6Secret, target.URL))
			s := review7Start(t, live, true)
			if code := review9Post(t, s.base, "q", `{"id":"e0","grant_id":"G-0","at":"2026-11-30T10:00:00Z"}`); code != 200 {
				t.Fatalf("post: %d", code)
			}
			reviewAWaitFor(t, "1 letters", 15*time.Second, "dlq", "list", "--config", live)

			mode.Store(1)
			ctx, cancel := context.WithCancel(t.Context())
			var out, errb bytes.Buffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, append(tc.args("1"), "--config", live), func(string) string { return "" }, nil, &out, &errb)
			}()
			select {
			case <-arrived: // the forward is in flight: Ctrl-C
			case <-time.After(20 * time.Second):
				t.Fatalf("%s did not forward", tc.name)
			}
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not stop within 30 s of the interrupt", tc.name)
			}

			// The receiver is fixed; a newer event of the same subject
			// arrives. serve should apply it within seconds.
			mode.Store(2)
			if code := review9Post(t, s.base, "q", `{"id":"e1","grant_id":"G-0","at":"2026-11-30T11:00:00Z"}`); code != 200 {
				t.Fatalf("post: %d", code)
			}
			r := reviewAWaitFor(t, "set by this key", 20*time.Second, "trace", "q:default:evt:e1", "--config", live)
			if !strings.Contains(r.stdout, "set by this key") {
				t.Errorf("after an interrupted %s, a newer event of its subject was not applied within 20 s (the interrupted command left its lease):\n%s stdout:\n%s%s stderr:\n%s\ntrace q:default:evt:e1:\n%s",
					tc.name, tc.name, out.String(), tc.name, errb.String(), r.stdout)
			}
		})
	}
}
