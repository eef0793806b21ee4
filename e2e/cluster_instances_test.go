package e2e

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	js "github.com/nats-io/nats.go/jetstream"
)

// Two instances on one cluster, deployed as the README says: both accept
// webhooks, one applies them (the other runs with roles.consumer false).
// Each subject's events are sent in order (the next only after the
// previous one was answered 200), half through each gateway: every one is
// applied. With both applying (the durable consumer shared), a subject's
// consecutive events went to different instances, and the one holding the
// newer event could apply it first: 184 of 7017 events were judged stale
// in the review that found it, 116-317 of about 1500 in this test.
func TestTwoGatewaysOneConsumerKeepEachSubjectsOrder(t *testing.T) {
	c := startCluster(t)
	j := c.client()
	a := startServe(t, "a", writeClusterConfig(t, clusterConfig{natsURL: c.URL()}))
	b := startServe(t, "b", writeClusterConfig(t, clusterConfig{natsURL: c.URL(), roles: "{ gateway: true, consumer: false }"}))
	s := startInOrderSender(t, []string{a.baseURL, b.baseURL}, 10)
	s.waitAcked(t, 1500)
	s.stopAndWait()
	requireAllApplied(t, j, s.acked)
}

// inOrderSender posts each subject's events in order, each only after the
// previous one was answered 200 (retrying other answers), spreading them
// over the gateways given.
type inOrderSender struct {
	mu    sync.Mutex
	acked []string
	stop  chan struct{}
	wg    sync.WaitGroup
}

var inOrderRuns int

func startInOrderSender(t *testing.T, gateways []string, subjects int) *inOrderSender {
	t.Helper()
	inOrderRuns++
	run := inOrderRuns
	s := &inOrderSender{stop: make(chan struct{})}
	hc := &http.Client{Timeout: 20 * time.Second}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(run) * 24 * time.Hour)
	for subj := range subjects {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			name := fmt.Sprintf("S%d", subj)
			for n := 0; ; n++ {
				id := fmt.Sprintf("r%d-%s-%d", run, name, n)
				body := fmt.Appendf(nil, `{"grant_id":%q,"type":"t","occurred_at":%q}`, name, base.Add(time.Duration(n)*time.Second).Format(time.RFC3339))
				for try := 0; ; try++ {
					select {
					case <-s.stop:
						return
					default:
					}
					req, _ := http.NewRequest(http.MethodPost, gateways[(n+try)%len(gateways)]+"/webhooks/grants", bytesReader(body))
					req.Header = signGrants(t, id, body)
					req.Header.Set("Content-Type", "application/json")
					if resp, err := hc.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
					time.Sleep(50 * time.Millisecond)
				}
				s.mu.Lock()
				s.acked = append(s.acked, "grants:default:evt:"+id)
				s.mu.Unlock()
			}
		}()
	}
	return s
}

// waitAcked waits until n events were answered 200.
func (s *inOrderSender) waitAcked(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s.mu.Lock()
		got := len(s.acked)
		s.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d events answered 200 within 60 s", got, n)
		}
	}
}

func (s *inOrderSender) stopAndWait() { close(s.stop); s.wg.Wait() }

// requireAllApplied: once the consumer has settled everything, every key
// in acked is in GRANTS; a missing one is listed with its stale reason.
func requireAllApplied(t *testing.T, j js.JetStream, acked []string) {
	t.Helper()
	waitSettled(t, j, 90*time.Second)
	granted := map[string]bool{}
	for _, m := range scanStream(t, j, "GRANTS") {
		granted[m.header.Get("Nats-Msg-Id")] = true
	}
	stale := map[string]string{}
	for _, m := range scanStream(t, j, "AUDIT") {
		recs, _ := event.AuditRecords(m.data)
		for _, r := range recs {
			if r.Decision == event.DecisionStale {
				stale[r.Key] = r.Reason
			}
		}
	}
	var missing []string
	for _, k := range acked {
		if !granted[k] {
			missing = append(missing, k+" ("+stale[k]+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("%d of %d events, each sent only after the previous one of its subject was answered 200, never applied; first ones:\n%v",
			len(missing), len(acked), missing[:min(len(missing), 10)])
	}
}
