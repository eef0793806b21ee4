package e2e

import (
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// lockRenewal waits for the consumer lock's next renewal and returns when
// it was seen.
func lockRenewal(t *testing.T, j js.JetStream) time.Time {
	t.Helper()
	kv, err := j.KeyValue(t.Context(), "HOOKGATE_LOCKS")
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(t.Context(), "consumer", js.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.Updates():
		if e == nil {
			t.Fatal("lock watch ended")
		}
		return time.Now()
	case <-time.After(10 * time.Second):
		t.Fatal("consumer lock not renewed within 10 s")
	}
	return time.Time{}
}

// TestReviewKLockBucketLeaderKillKeepsApplying kills the node that leads
// only HOOKGATE_LOCKS (every other stream, the durable consumer and the
// meta group are led elsewhere, and hookgate is not connected to that
// node). Everything an event needs (WEBHOOKS, the consumer, WATERMARKS,
// APPLIED, GRANTS) stays up, so events keep applying within a second or
// two; the lock bucket's election (4-9 s in nats-server) must not stop the
// holder. The holder renews every 3.3 s and gives the lock up when it
// could not renew for 6.7 s (ConsumerLock.renew), shorter than an
// election: it stops its consumer, and events wait until the bucket has a
// leader again and the lock is taken anew.
func TestReviewKLockBucketLeaderKillKeepsApplying(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j0 := c.client()
	victim, home := c.victimAndHome(j0)
	j := clientVia(t, c.urlWithout(victim))
	hg := startServe(t, "hg", writeClusterConfig(t, clusterConfig{natsURL: c.urlWithout(victim)}))
	l := newLoad(t, "lockkill", []string{hg.baseURL})
	appliedWithin(t, j, l, l.newEvent("G-1"), 30*time.Second)

	// An election takes 3 to 9 s after a kill (the followers' random
	// timeout of 4-9 s runs from the last heartbeat). A round whose
	// election came before the holder's time was up proves nothing: the
	// node is restarted and killed again, up to 4 rounds.
	for round := 1; round <= 4; round++ {
		c.placeAllBut(j, home.name, map[string]string{"KV_HOOKGATE_LOCKS": victim.name})
		lostBefore := countLines(hg, "consumer lock lost")
		for range 3 {
			appliedWithin(t, j, l, l.newEvent("G-1"), 10*time.Second)
		}
		// Kill 3 s after a renewal: the earlier holder (renewed every 3.3 s,
		// given up 6.7 s after its last renewal) then had 3.7 s left; the
		// holder now renews every 2 s and rides out 13 s or more.
		renewed := lockRenewal(t, j)
		for time.Since(renewed) < 3*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		c.kill9(victim)
		killed := time.Now()
		elected := make(chan time.Duration, 1)
		go func() {
			c.streamLeader(j, "KV_HOOKGATE_LOCKS", victim, 60*time.Second)
			elected <- time.Since(killed)
		}()
		t.Logf("round %d: killed %s (leader of KV_HOOKGATE_LOCKS only) %s after the lock's last renewal", round, victim.name, killed.Sub(renewed).Round(time.Millisecond))
		var worst time.Duration
		n := 0
		for time.Since(killed) < 15*time.Second {
			took := appliedWithin(t, j, l, l.newEvent("G-1"), 60*time.Second)
			n++
			worst = max(worst, took)
		}
		election := <-elected
		lost := countLines(hg, "consumer lock lost") - lostBefore
		t.Logf("round %d: KV_HOOKGATE_LOCKS re-elected %s after the kill; %d events; slowest applied after %s; lock lost %d times",
			round, election.Round(time.Millisecond), n, worst.Round(time.Millisecond), lost)
		// The lock held is what is asserted; how long events waited is
		// logged above, not asserted (review AG: a timed assertion).
		if lost > 0 {
			t.Fatalf("the lock bucket's leader was killed (nothing else; its election took %s): the holder lost the lock %d times (slowest event applied after %s); want no loss",
				election.Round(time.Millisecond), lost, worst.Round(time.Millisecond))
		}
		// Conclusive only when the election (as this test sees it, up to a
		// second late) took clearly longer than the 3.7 s the earlier
		// holder had left: at 4.2 s that holder once held on.
		if election > 5*time.Second {
			return // an election longer than the old holder's time left, and it held on
		}
		c.restart(victim)
		c.waitReplicasCurrent(j, "KV_HOOKGATE_LOCKS", 30*time.Second)
	}
	t.Skip("every election was quicker than the holder's time left: inconclusive")
}

// countLines counts the log lines of p containing s.
func countLines(p *hgProc, s string) int { return strings.Count(p.stderr.String(), s) }
