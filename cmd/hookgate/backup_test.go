package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// backupConfig: serve with its consumer on an embedded server in dataDir
// that listens on natsListen (so the CLI reaches it), review6's provider.
func backupConfig(t *testing.T, dataDir, natsListen string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", dataDir, natsListen, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// backupPost sends one signed event; it returns the HTTP status and the
// answer's status field. Safe to call from any goroutine.
func backupPost(client *http.Client, base, body string) (int, string, error) {
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		return 0, "", err
	}
	h, err := sch.Sign([]byte(body), config.Secret(review6Secret), "", time.Now())
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/p", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var ans struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ans)
	return resp.StatusCode, ans.Status, nil
}

// backupEvent is event i of the load: 20 subjects, each event newer than
// every earlier one of its subject.
func backupEvent(i int) (id, body string) {
	id = fmt.Sprintf("e-%05d", i)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	return id, fmt.Sprintf(`{"id":%q,"grant_id":"G-%d","at":%q}`, id, i%20, at.Format(time.RFC3339))
}

// streamKeys reads every message's Nats-Msg-Id of a stream, in order.
func streamKeys(t *testing.T, c *jetstream.Conn, stream string) []string {
	t.Helper()
	keys, err := readKeys(t, c, stream)
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	return keys
}

// readKeys is streamKeys with the read's error (a stream not made yet).
func readKeys(t *testing.T, c *jetstream.Conn, stream string) ([]string, error) {
	var keys []string
	err := jetstream.Read(t.Context(), c, stream, jetstream.Range{}, func(m jetstream.StoredMsg, _ uint64) error {
		keys = append(keys, m.Header.Get("Nats-Msg-Id"))
		return nil
	})
	return keys, err
}

// waitApplied waits until the apply consumer has nothing pending or
// unacknowledged.
func waitApplied(t *testing.T, c *jetstream.Conn, s *review7Serve) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); ; {
		// Caught up means acknowledged up to WEBHOOKS' last message: a
		// consumer info read alone can show nothing pending for a message
		// stored a moment before (a CI run read GRANTS too early).
		ci, err := c.JS.Consumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
		if err == nil {
			var info *js.ConsumerInfo
			info, err = ci.Info(t.Context())
			st, serr := c.JS.Stream(t.Context(), jetstream.StreamWebhooks)
			if err == nil && serr == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= st.CachedInfo().State.LastSeq {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("the consumer did not catch up within 60 s (%v)\n%s", err, tail(s.stderr.String(), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBackupUnderLoadRestoresAConsistentStore: `hookgate backup` taken
// while webhooks arrive and the consumer applies them, restored with
// `hookgate restore` onto a new data_dir and served from there, gives a
// store the consumer goes on from: every event of the restored WEBHOOKS
// is in GRANTS once (none acknowledged without its effects, which a copy
// of a running data_dir allowed: review AS and AT), GRANTS holds only
// accepted events, each subject's in order, new events apply after the
// restore (the consumer's state is not ahead of the stream), a retry of a
// restored event is a duplicate, and AUDIT records the restore.
func TestBackupUnderLoadRestoresAConsistentStore(t *testing.T) {
	listenA := review9gFreeAddr(t)
	cfgA := backupConfig(t, t.TempDir(), listenA)
	a := review7Start(t, cfgA, true)
	client := &http.Client{Timeout: 20 * time.Second}

	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		sent     atomic.Int64
		stop     = make(chan struct{})
		loadErr  = make(chan error, 1)
	)
	go func() {
		defer close(loadErr)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id, body := backupEvent(i)
			code, _, err := backupPost(client, a.base, body)
			if err != nil || code != 200 {
				loadErr <- fmt.Errorf("event %s: %d %v", id, code, err)
				return
			}
			mu.Lock()
			accepted["p:default:evt:"+id] = true
			mu.Unlock()
			sent.Add(1)
		}
	}()
	for end := time.Now().Add(30 * time.Second); sent.Load() < 300; {
		if time.Now().After(end) {
			t.Fatalf("300 events not accepted within 30 s (%d)", sent.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := filepath.Join(t.TempDir(), "backup")
	before := sent.Load()
	r := review9Run(t, "", "backup", "--config", cfgA, "--out", out)
	after := sent.Load()
	close(stop)
	if err := <-loadErr; err != nil {
		t.Fatal(err)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "backup of 6 streams in ") {
		t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after == before {
		t.Fatalf("no event was accepted while the backup ran (%d before and after): it proves nothing of a backup under load", before)
	}
	t.Logf("backup under load: %d events accepted before it, %d while it ran\n%s", before, after-before, r.stdout)
	if r := review9Run(t, "", "backup", "--config", cfgA, "--out", out); r.code != 1 || !strings.Contains(r.stderr, "is not empty") {
		t.Errorf("a backup into a used directory: exit %d %s", r.code, r.stderr)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	// A damaged copy is refused before anything is touched.
	damaged := filepath.Join(t.TempDir(), "damaged")
	if err := os.CopyFS(damaged, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(damaged, "GRANTS.snap")
	data, err := os.ReadFile(g)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(g, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dirC := filepath.Join(t.TempDir(), "c")
	if r := review9Run(t, "", "restore", "--config", backupConfig(t, dirC, ""), "--from", damaged); r.code != 1 || !strings.Contains(r.stderr, "GRANTS.snap does not match the manifest") {
		t.Errorf("restore of a damaged backup: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(dirC); !os.IsNotExist(err) {
		t.Errorf("the refused restore made data_dir %s (%v)", dirC, err)
	}

	dirB := filepath.Join(t.TempDir(), "b")
	listenB := review9gFreeAddr(t)
	cfgB := backupConfig(t, dirB, listenB)
	r = review9Run(t, "", "restore", "--config", cfgB, "--from", out)
	if r.code != 0 || !strings.Contains(r.stdout, "restored 6 streams from ") {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b := review7Start(t, cfgB, true)
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "backup-test", URL: "nats://" + listenB, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitApplied(t, c, b)

	stored := streamKeys(t, c, jetstream.StreamWebhooks)
	grants := streamKeys(t, c, jetstream.StreamGrants)
	if int64(len(stored)) < before {
		t.Fatalf("the restored WEBHOOKS holds %d events; %d were accepted before the backup began", len(stored), before)
	}
	inGrants := map[string]int{}
	for _, k := range grants {
		inGrants[k]++
		if inGrants[k] == 2 {
			t.Errorf("%s is in GRANTS twice", k)
		}
		if !accepted[k] {
			t.Errorf("GRANTS holds %s, which was never accepted", k)
		}
	}
	missing := 0
	for _, k := range stored {
		if inGrants[k] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("%s is in the restored WEBHOOKS but not in GRANTS: acknowledged in the backup without its effects", k)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d restored events never reached GRANTS", missing, len(stored))
	}
	last := map[string]string{} // subject -> last key seen in GRANTS
	for _, k := range grants {
		var i int
		if _, err := fmt.Sscanf(k, "p:default:evt:e-%d", &i); err != nil {
			t.Fatalf("GRANTS key %q", k)
		}
		subj := fmt.Sprint(i % 20)
		if prev, ok := last[subj]; ok && prev > k {
			t.Errorf("GRANTS has %s after %s of the same subject", k, prev)
		}
		last[subj] = k
	}

	// The restored serve takes new events and applies them after the
	// restored ones, and knows the restored ones.
	next := int(after) + 1000
	for i := next; i < next+5; i++ {
		_, body := backupEvent(i)
		if code, st, err := backupPost(client, b.base, body); err != nil || code != 200 || st != "accepted" {
			t.Fatalf("a new event on the restored serve: %d %q %v", code, st, err)
		}
	}
	_, body := backupEvent(3)
	if code, st, err := backupPost(client, b.base, body); err != nil || code != 200 || st != "duplicate" {
		t.Fatalf("a retry of a restored event: %d %q %v, want 200 duplicate", code, st, err)
	}
	waitApplied(t, c, b)
	grants = streamKeys(t, c, jetstream.StreamGrants)
	for i := next; i < next+5; i++ {
		if id, _ := backupEvent(i); !slices.Contains(grants, "p:default:evt:"+id) {
			t.Errorf("new event %s was not applied on the restored serve", id)
		}
	}
	var restored int
	err = jetstream.Read(t.Context(), c, jetstream.StreamAudit, jetstream.Range{Filter: "audit.restored.>"}, func(m jetstream.StoredMsg, _ uint64) error {
		if bytes.Contains(m.Body, []byte(`"actor":"operator"`)) && bytes.Contains(m.Body, []byte("restored from the backup")) {
			restored++
		}
		return nil
	})
	if err != nil || restored != 1 {
		t.Errorf("AUDIT's restored records: %d (%v), want 1", restored, err)
	}
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	if r := review9Run(t, "", "restore", "--config", cfgB, "--from", out); r.code != 1 || !strings.Contains(r.stderr, "is not empty") {
		t.Errorf("a restore onto a used data_dir: exit %d %s", r.code, r.stderr)
	}
}

// serveBesideAnOldServe runs serve (its embedded server listening) and,
// on a connection of its own, an older serve "old-host/7" with the
// consumer role: it answers on hookgate.instances, not on the pause. The
// backup waits wait for the pause's answers (restored at cleanup).
func serveBesideAnOldServe(t *testing.T, wait time.Duration) (*review7Serve, string, *jetstream.Conn) {
	t.Helper()
	listen := review9gFreeAddr(t)
	cfg := backupConfig(t, t.TempDir(), listen)
	s := review7Start(t, cfg, true)
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "old-serve", URL: "nats://" + listen, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	stop, err := jetstream.AnswerInstances(c, func() []byte {
		return []byte(`{"instance":"old-host/7","version":"v0.9.0","roles":["gateway","consumer"],"applying":true}`)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	was := pauseAnswerWait
	pauseAnswerWait = wait
	t.Cleanup(func() { pauseAnswerWait = was })
	return s, cfg, c
}

// TestBackupRefusedWhenAConsumerDoesNotPause: a running serve with the
// consumer role that does not answer the pause (a hookgate from before
// backup) would apply events while the streams are read, so the backup
// refuses, names it, and leaves nothing behind; the serves that did pause
// are resumed and apply again.
func TestBackupRefusedWhenAConsumerDoesNotPause(t *testing.T) {
	s, cfg, c := serveBesideAnOldServe(t, 3*time.Second)
	out := filepath.Join(t.TempDir(), "backup")
	r := review9Run(t, "", "backup", "--config", cfg, "--out", out)
	if r.code != 1 || !strings.Contains(r.stderr, "(old-host/7: no answer") || !strings.Contains(r.stderr, "did not pause") {
		t.Fatalf("backup with a consumer that does not pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused backup left %s (%v)", out, err)
	}
	// The serve that paused was resumed: it applies again.
	client := &http.Client{Timeout: 10 * time.Second}
	_, body := backupEvent(1)
	if code, _, err := backupPost(client, s.base, body); err != nil || code != 200 {
		t.Fatalf("post: %d %v", code, err)
	}
	waitApplied(t, c, s)
	if keys := streamKeys(t, c, jetstream.StreamGrants); !slices.Contains(keys, "p:default:evt:e-00001") {
		t.Fatalf("after the refused backup the serve did not apply: GRANTS %v", keys)
	}
}

// TestBackupRefusedWhenNoServeAnswers: something subscribes to
// hookgate.instances but does not answer (a serve too busy, or one whose
// permissions let it subscribe but not reply): whether a consumer applies
// is unknown, so the backup refuses instead of reading the streams
// unpaused, which it may do only when nothing subscribes at all.
func TestBackupRefusedWhenNoServeAnswers(t *testing.T) {
	c := jstest.Start(t, "").Conn
	sys := &system{conn: c}
	if want, err := consumerServes(t.Context(), sys); err != nil || len(want) != 0 {
		t.Fatalf("nothing subscribed: %v, %v; want nothing to pause", want, err)
	}
	sub, err := c.NC.Subscribe(jetstream.SubjectInstances, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if want, err := consumerServes(t.Context(), sys); err == nil || !strings.Contains(err.Error(), "none answered") {
		t.Fatalf("a subscriber that does not answer: %v, %v; want the backup refused", want, err)
	}
}

// backup --out into what a killed backup left (snapshot files, no
// manifest) says so, where it said "a backup never overwrites another" of
// a directory restore refuses as no backup (an operator tools audit, stop
// 40); a finished backup or other files are "not empty".
func TestBackupDirSaysWhatIsThere(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files []string
		want  string
	}{
		{"killed backup", []string{"DLQ.snap", "KV_WATERMARKS.snap"}, "holds a backup that did not finish (snapshot files, no manifest.json"},
		{"finished backup", []string{"DLQ.snap", manifestFile}, "is not empty: give a new directory (a backup never overwrites another)"},
		{"other files", []string{"notes.txt"}, "is not empty: give a new directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			created, err := backupDir(dir)
			if created || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("backupDir = %v, %v; want an error saying %q", created, err, tt.want)
			}
		})
	}
}
