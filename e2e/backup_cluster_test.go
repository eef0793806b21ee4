package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// TestRestoreEmbeddedBackupOntoCluster: the way from one machine to a
// cluster. A `hookgate backup` of an embedded serve, taken while a sender
// posts (in order, with redeliveries) and the consumer applies, restored
// with `hookgate restore` onto a 3-node cluster (nats.url, replicas 3) and
// served there: the streams have 3 replicas, every event of the restored
// WEBHOOKS reaches GRANTS once and in its subject's order, GRANTS holds
// only acknowledged events, the consumer goes on with new events, and a repeat of a restored event, which the
// cluster's duplicate window does not know until its servers restart
// (README), is stored but not applied twice.
func TestRestoreEmbeddedBackupOntoCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	cfgCluster := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	raw, err := os.ReadFile(cfgCluster)
	if err != nil {
		t.Fatal(err)
	}
	natsLines := fmt.Sprintf("  url: %q\n  replicas: 3\n", c.URL())
	if !strings.Contains(string(raw), natsLines) {
		t.Fatalf("the cluster config has no %q:\n%s", natsLines, raw)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfgEmbedded := filepath.Join(t.TempDir(), "embedded.yaml")
	embedded := strings.Replace(string(raw), natsLines, fmt.Sprintf("  url: \"\"\n  replicas: 1\n  embedded: { data_dir: %q, listen: %q, token: tok }\n", t.TempDir(), listen), 1)
	if err := os.WriteFile(cfgEmbedded, []byte(embedded), 0o600); err != nil {
		t.Fatal(err)
	}

	a := startServe(t, "embedded", cfgEmbedded)
	l := newLoad(t, "mig", []string{a.baseURL})
	l.run(1) // one sender: each subject's events stored in their order, none stale
	l.waitPosts(t, 150, 30*time.Second)
	out := filepath.Join(t.TempDir(), "backup")
	l.mu.Lock()
	before := len(l.attempts)
	l.mu.Unlock()
	stdout, stderr, code := cliRun(t, "backup", "--config", cfgEmbedded, "--out", out)
	l.mu.Lock()
	during := len(l.attempts) - before
	l.mu.Unlock()
	l.stop()
	if code != 0 || !strings.Contains(stdout, "paused the consumer of ") {
		t.Fatalf("backup: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("backup (%d posts while it ran):\n%s", during, stdout)
	if during == 0 {
		t.Fatalf("no post while the backup ran: it proves nothing of a backup under load")
	}
	a.stop(t)

	stdout, stderr, code = cliRun(t, "restore", "--config", cfgCluster, "--from", out)
	if code != 0 || !strings.Contains(stdout, "restored 6 streams from ") {
		t.Fatalf("restore onto the cluster: exit %d\n%s%s", code, stdout, stderr)
	}
	b := startServe(t, "cluster", cfgCluster)
	ctx := t.Context()
	for _, name := range []string{"WEBHOOKS", "GRANTS", "KV_WATERMARKS", "AUDIT"} {
		s, err := j.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s on the cluster: %v", name, err)
		}
		if n := s.CachedInfo().Config.Replicas; n != 3 {
			t.Errorf("restored %s has %d replicas, want 3", name, n)
		}
	}
	caughtUp := func() bool {
		cons, err := j.Consumer(ctx, "WEBHOOKS", "hookgate-apply")
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}
	// The consumer's numbers alone can read 0 pending before the serve
	// took the lock and set the restored consumer back to its ack floor
	// (a CI run): wait for the events themselves.
	stored := storedKeys(t, j)
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		have := map[string]bool{}
		for _, g := range grantsMessages(t, j) {
			have[g.key] = true
		}
		missing := slices.DeleteFunc(slices.Clone(stored), func(k string) bool { return have[k] })
		if len(missing) == 0 && caughtUp() {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d of the %d events of the restored WEBHOOKS did not reach GRANTS within 90 s (caught up: %v): %v", len(missing), len(stored), caughtUp(), missing[:min(len(missing), 5)])
		}
	}
	grants := grantsMessages(t, j)
	l.mu.Lock()
	acked := l.acked
	l.mu.Unlock()
	seen := map[string]bool{}
	lastSeq := map[string]int{}
	for _, g := range grants {
		if seen[g.key] {
			t.Errorf("%s is in GRANTS twice", g.key)
		}
		seen[g.key] = true
		if !acked[g.key] {
			t.Errorf("GRANTS holds %s, which no sender was answered 200 for", g.key)
		}
		if g.seq <= lastSeq[g.subject] {
			t.Errorf("GRANTS has %s (seq %d of %s) after seq %d", g.key, g.seq, g.subject, lastSeq[g.subject])
		}
		lastSeq[g.subject] = g.seq
	}
	if len(stored) == 0 {
		t.Fatal("the restored WEBHOOKS is empty")
	}

	// New events apply on the cluster; an old one sent again is stored
	// (the window is empty until the servers restart) and not applied.
	l.setURLs([]string{b.baseURL})
	var fresh []string
	for _, subj := range l.subjects {
		ev := l.newEvent(subj)
		l.deliver(0, ev, false)
		fresh = append(fresh, ev.key)
	}
	old := l.byKey[stored[0]]
	l.deliver(0, old, false)
	waitFor(t, "the new events to reach GRANTS", 60*time.Second, func() bool {
		have := map[string]int{}
		for _, g := range grantsMessages(t, j) {
			have[g.key]++
		}
		for _, k := range fresh {
			if have[k] != 1 {
				return false
			}
		}
		return caughtUp()
	})
	n := 0
	for _, g := range grantsMessages(t, j) {
		if g.key == old.key {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%s, sent again after the restore, is in GRANTS %d times", old.key, n)
	}
	if len(l.problems) > 0 || len(l.gaveUp) > 0 {
		t.Errorf("sender saw: %v; gave up on %v", l.problems, l.gaveUp)
	}
	b.stop(t)
}

type grantMsg struct {
	key, subject string
	seq          int
}

// grantsMessages reads GRANTS: each message's key, grant id and the
// load's per-subject sequence from its body.
func grantsMessages(t *testing.T, j js.JetStream) []grantMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "GRANTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []grantMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("GRANTS seq %d: %v", seq, err)
		}
		var body struct {
			Grant string `json:"grant_id"`
			Seq   int    `json:"seq"`
		}
		if err := json.Unmarshal(m.Data, &body); err != nil {
			t.Fatalf("GRANTS seq %d: %v", seq, err)
		}
		out = append(out, grantMsg{key: m.Header.Get("Nats-Msg-Id"), subject: body.Grant, seq: body.Seq})
	}
	return out
}
