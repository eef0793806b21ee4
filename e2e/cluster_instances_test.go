package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	js "github.com/nats-io/nats.go/jetstream"
)

// Two instances on one cluster with the parts split by roles: both accept
// webhooks, one applies them (the other runs with roles.consumer false).
// Each subject's events are sent in order (the next only after the
// previous one was answered 200), half through each gateway: every one is
// applied.
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

// Two instances with the consumer role on one cluster: one at a time
// applies events (the consumer lock), so every event sent in order is
// applied, also across a SIGTERM of the applying instance, after which the
// other takes over. (Both pulling side by side, the one holding a subject's
// newer event could apply it first: 184 of 7017 events stale in the
// review that found it, 116-317 of about 1500 in this test.)
func TestTwoConsumersTakeTurnsAndKeepEachSubjectsOrder(t *testing.T) {
	c := startCluster(t)
	j := c.client()
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	procs := []*hgProc{startServe(t, "a", cfg), startServe(t, "b", cfg)}
	s := startInOrderSender(t, []string{procs[0].baseURL, procs[1].baseURL}, 10)
	s.waitAcked(t, 1500)
	s.stopAndWait()
	requireAllApplied(t, j, s.acked)

	holder := lockHolder(t, j, procs)
	standby := procs[1-holder]
	s = startInOrderSender(t, []string{procs[0].baseURL, procs[1].baseURL}, 10)
	s.waitAcked(t, 300)
	procs[holder].stop(t) // while the load runs
	s.mu.Lock()
	s.gateways = []string{standby.baseURL}
	s.mu.Unlock()
	s.waitAcked(t, 1300)
	s.stopAndWait()
	// Across the handover too. Deliveries on their way to the stopping
	// holder when it stopped pulling were never handed back: until the
	// standby reset the durable consumer to its ack floor on taking a
	// released lock, they came back after the ack wait, behind newer
	// events, stale (0-11 of about 1300 with three of these tests at once
	// on 2 cores; with both instances applying side by side it was about
	// 8%).
	requireAllApplied(t, j, s.acked)
	if lockHolder(t, j, procs) != 1-holder {
		t.Fatal("the standby does not hold the consumer lock after the holder stopped")
	}
}

// kill -9 of the instance holding the consumer lock under in-order load:
// the standby takes the lock only the ack wait after its expiry, by when
// the dead holder's fetched events are due for redelivery, so it gets
// them before anything newer. 0 stale in most runs (30 of 1021 with no
// grace). The README's known limit: a subject whose lease the dead holder
// held is in doubt, and its other events handed back to wait for the
// in-doubt one can come back after newer ones fetched meanwhile (17 of
// 1026 in one CI run); each of those the dead holder had received, so
// "superseded while retrying". (53 of 1069 in another CI run were the
// standby's own first deliveries, dropped by nats.go from a pull inbox
// then sized for six batches, back one ack wait later: the inbox now holds
// the consumer's whole window, TestSourceInboxHoldsEveryOutstandingDelivery.)
func TestConsumerHolderKill9KeepsEachSubjectsOrder(t *testing.T) {
	c := startCluster(t)
	j := c.client()
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	procs := []*hgProc{startServe(t, "a", cfg), startServe(t, "b", cfg)}
	s := startInOrderSender(t, []string{procs[0].baseURL, procs[1].baseURL}, 10)
	s.waitAcked(t, 300)
	holder := lockHolder(t, j, procs)
	procs[holder].kill() // while the load runs
	s.mu.Lock()
	s.gateways = []string{procs[1-holder].baseURL}
	s.mu.Unlock()
	s.waitAcked(t, 1000)
	s.stopAndWait()
	requireFewStale(t, j, s.acked, 4, "the kill")
}

// requireFewStale fails unless every event of acked not applied is one an
// instance that stopped had received (stale, "superseded while retrying"),
// and they are at most pct percent of acked.
func requireFewStale(t *testing.T, j js.JetStream, acked []string, pct int, across string) {
	t.Helper()
	missing := notApplied(t, j, acked)
	for _, m := range missing {
		if !strings.Contains(m, "superseded while retrying") {
			t.Errorf("not applied, and not one the stopping holder had received: %s", m)
		}
	}
	if len(missing)*100 > len(acked)*pct {
		t.Fatalf("%d of %d events sent in order not applied across %s, more than %d%%: %v", len(missing), len(acked), across, pct, missing[:min(len(missing), 10)])
	}
	if len(missing) > 0 {
		t.Logf("%d of %d events sent in order not applied across %s (a known limit, see the README)", len(missing), len(acked), across)
	}
}

// lockHolder is the index of the process holding the consumer lock.
func lockHolder(t *testing.T, j js.JetStream, procs []*hgProc) int {
	t.Helper()
	// The lock's bucket is R3: right after the cluster formed, or while a
	// node dies, a read can meet no leader ("no responders"); wait for one.
	owner := lockOwner(t, j)
	for end := time.Now().Add(30 * time.Second); owner == ""; owner = lockOwner(t, j) {
		if time.Now().After(end) {
			t.Fatal("no consumer lock holder could be read for 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, p := range procs {
		if strings.Contains(owner, fmt.Sprintf("/%d/", p.cmd.Process.Pid)) {
			return i
		}
	}
	t.Fatalf("consumer lock held by %s, none of the instances", owner)
	return -1
}

// lockOwner is the consumer lock's lease owner, "" when none holds it
// (or it cannot be read now).
func lockOwner(t *testing.T, j js.JetStream) string {
	t.Helper()
	kv, err := j.KeyValue(t.Context(), "HOOKGATE_LOCKS")
	if err != nil {
		return ""
	}
	e, err := kv.Get(t.Context(), "consumer")
	if err != nil {
		return ""
	}
	var m struct {
		Lease *struct{ Owner string } `json:"lease"`
	}
	if json.Unmarshal(e.Value(), &m) != nil || m.Lease == nil {
		return ""
	}
	return m.Lease.Owner
}

// inOrderSender posts each subject's events in order, each only after the
// previous one was answered 200 (retrying other answers), spreading them
// over the gateways given.
type inOrderSender struct {
	mu       sync.Mutex
	acked    []string
	gateways []string     // where to send; may be replaced while running
	failures atomic.Int64 // tries not answered 200
	stop     chan struct{}
	wg       sync.WaitGroup
}

var inOrderRuns atomic.Int64 // each run's events get their own keys and times

func startInOrderSender(t *testing.T, gateways []string, subjects int) *inOrderSender {
	t.Helper()
	run := inOrderRuns.Add(1)
	s := &inOrderSender{stop: make(chan struct{}), gateways: gateways}
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
					s.mu.Lock()
					gw := s.gateways[(n+try)%len(s.gateways)]
					s.mu.Unlock()
					req, _ := http.NewRequest(http.MethodPost, gw+"/webhooks/grants", bytesReader(body))
					req.Header = signGrants(t, id, body)
					req.Header.Set("Content-Type", "application/json")
					if resp, err := hc.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
					s.failures.Add(1)
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
	if missing := notApplied(t, j, acked); len(missing) > 0 {
		t.Fatalf("%d of %d events, each sent only after the previous one of its subject was answered 200, never applied; first ones:\n%v",
			len(missing), len(acked), missing[:min(len(missing), 10)])
	}
}

// notApplied waits until the consumer has settled everything and returns
// the keys in acked that are not in GRANTS, each with its stale reason.
func notApplied(t *testing.T, j js.JetStream, acked []string) []string {
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
	return missing
}
