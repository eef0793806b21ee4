package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Review BB: the consumer pause that `hookgate backup` takes, on a cluster.

// reviewBBPost posts one grants event for subject G through base and
// returns its key.
func reviewBBPost(t *testing.T, base, id, subject string) string {
	t.Helper()
	body := fmt.Appendf(nil, `{"grant_id":%q,"type":"t","occurred_at":%q}`, subject, time.Now().UTC().Format(time.RFC3339))
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/grants", bytes.NewReader(body))
	req.Header = signGrants(t, id, body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("post %s: %v", id, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post %s: %d", id, resp.StatusCode)
	}
	return "grants:default:evt:" + id
}

func reviewBBGranted(t *testing.T, j js.JetStream, key string) bool {
	t.Helper()
	return slices.ContainsFunc(scanStream(t, j, "GRANTS"), func(m storedMsg) bool { return m.header.Get("Nats-Msg-Id") == key })
}

// TestReviewBBBackupWithAStandbyConsumer: the normal HA deployment, two
// serves with the consumer role on one cluster, one holding the consumer
// lock and applying, the other standing by. pauseConsumers wants an answer
// from every instance whose roles include "consumer" (the standby too),
// but a serve subscribes to hookgate.consumer.pause only inside runGated,
// which runs only while it holds the lock (lock.Hold's run): the standby
// never answers. So `hookgate backup` of any cluster with a standby waits
// pauseAnswerWait (2 min 10 s) and fails "<standby>: no answer (a hookgate
// from before backup, ...)", telling the operator to upgrade or stop a
// serve that is the same build.
// Expected: backup succeeds: every serve with the consumer role answers
// the pause for its whole life (AnswerPauses subscribed in startConsumer,
// outside Hold; a standby answers paused at once and keeps the pause in
// its gate, so it does not start applying if it takes the lock during the
// backup).
func TestReviewBBBackupWithAStandbyConsumer(t *testing.T) {
	c := startCluster(t)
	j := c.client()
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	procs := []*hgProc{startServe(t, "a", cfg), startServe(t, "b", cfg)}
	holder := lockHolder(t, j, procs)
	key := reviewBBPost(t, procs[0].baseURL, "bb-standby-1", "S1")
	for end := time.Now().Add(30 * time.Second); !reviewBBGranted(t, j, key); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("not applied within 30 s")
		}
	}
	out := filepath.Join(t.TempDir(), "backup")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "backup", "--config", cfg, "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("backup of a cluster with a holder (%s, pid %d) and a standby (pid %d): exit %d after %s\n%s%s",
			procs[holder].name, procs[holder].cmd.Process.Pid, procs[1-holder].cmd.Process.Pid, ee.ExitCode(), time.Since(start).Round(time.Second), stdout.String(), stderr.String())
	}
	t.Logf("backup:\n%s", stdout.String())
}

// TestReviewBBPauseLostAtAHandover: a backup's pause is held only by the
// process that held the consumer lock when it came (its pauseGate, in
// memory; the standby does not even receive the request, see above). When
// that holder stops during the backup (SIGTERM of a rolling deploy, or its
// lock lost: Hold cancels the run, runGated returns, the lock is released)
// the standby takes the lock at once and starts applying, unpaused, while
// the backup still reads the streams: its cut holds effects of events the
// snapshots taken before do not (the inconsistency the pause exists to
// prevent), and the backup reports success, naming the paused serve.
// The request below is the one pauseConsumers sends (it renewed it every
// 15 s then; the standby applied until then, and would not even be reached by
// the renewal had it not subscribed by taking the lock).
// Expected: a pause in force stays in force across a handover: the
// standby keeps the pause too (it answers and keeps it in its gate), or
// the lock is not handed over while paused, or the backup notices that
// the applying instance changed and fails.
func TestReviewBBPauseLostAtAHandover(t *testing.T) {
	c := startCluster(t)
	j := c.client()
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.URL()})
	procs := []*hgProc{startServe(t, "a", cfg), startServe(t, "b", cfg)}
	holder := lockHolder(t, j, procs)
	standby := procs[1-holder]
	k0 := reviewBBPost(t, standby.baseURL, "bb-handover-0", "S1")
	for end := time.Now().Add(30 * time.Second); !reviewBBGranted(t, j, k0); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("not applied within 30 s")
		}
	}

	nc, err := nats.Connect(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]any{"id": "backup-review-bb", "for": int64(time.Minute)})
	if err := nc.PublishRequest("hookgate.consumer.pause", inbox, req); err != nil {
		t.Fatal(err)
	}
	// Both serves answer: the holder once it is idle, the standby at once.
	var answers []string
	answered := map[int]bool{}
	for end := time.Now().Add(30 * time.Second); len(answered) < len(procs); {
		m, err := sub.NextMsg(time.Until(end))
		if err != nil {
			t.Fatalf("answers to the pause within 30 s: %v (%v)", answers, err)
		}
		answers = append(answers, string(m.Data))
		for i, p := range procs {
			if strings.Contains(string(m.Data), fmt.Sprintf("/%d\"", p.cmd.Process.Pid)) && strings.Contains(string(m.Data), `"paused":true`) {
				answered[i] = true
			}
		}
	}
	t.Logf("answers to the pause: %v", answers)

	k1 := reviewBBPost(t, standby.baseURL, "bb-handover-1", "S1")
	procs[holder].stop(t) // SIGTERM, mid-backup
	// The standby takes the lock; the pause it keeps holds it before it
	// opens the consumer, and its paused flag (hookgate status) says so:
	// read once it holds the lock, no window to wait out.
	mine := fmt.Sprintf("/%d/", standby.cmd.Process.Pid)
	for end := time.Now().Add(30 * time.Second); !strings.Contains(lockOwner(t, j), mine); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the standby did not take the consumer lock within 30 s of the holder's stop (owner %q)", lockOwner(t, j))
		}
	}
	st := statusOf(t, cfg)
	i := slices.IndexFunc(st.Instances, func(d statusInstance) bool {
		return strings.HasSuffix(d.Instance, fmt.Sprintf("/%d", standby.cmd.Process.Pid))
	})
	if i < 0 {
		t.Fatalf("status lists no instance of %s (pid %d): %+v", standby.name, standby.cmd.Process.Pid, st.Instances)
	}
	if d := st.Instances[i]; !d.Paused || d.Applying || reviewBBGranted(t, j, k1) {
		t.Fatalf("the standby %s took the lock in the middle of a pause of 1 min that nobody resumed and is not held by it (%+v; %s applied: %v): the pause did not survive the handover",
			standby.name, d, k1, reviewBBGranted(t, j, k1))
	}
	// The backup ends: the event that waited is applied.
	req, _ = json.Marshal(map[string]any{"id": "backup-review-bb", "resume": true})
	if err := nc.Publish("hookgate.consumer.pause", req); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); !reviewBBGranted(t, j, k1); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s not applied within 30 s of the resume", k1)
		}
	}
}
