package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// Review BA: hookgate backup / restore.

// reviewBAConfig: serve with its consumer on an embedded server in dataDir
// listening on natsListen (the CLI reaches it there), review6's provider
// with the extra provider lines (indented 4) and top-level lines.
func reviewBAConfig(t *testing.T, dataDir, natsListen, providerExtra, topExtra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s%s%s",
		dataDir, natsListen, topExtra, review6Provider, providerExtra)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func reviewBAConnect(t *testing.T, listen string) *jetstream.Conn {
	t.Helper()
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "review-ba", URL: "nats://" + listen, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// reviewBAServe starts serve on reviewBAConfig (a new data_dir) and
// connects to its embedded server.
func reviewBAServe(t *testing.T, providerExtra, topExtra string) (s *review7Serve, cfg string, c *jetstream.Conn) {
	t.Helper()
	listen := review9gFreeAddr(t)
	cfg = reviewBAConfig(t, t.TempDir(), listen, providerExtra, topExtra)
	return review7Start(t, cfg, true), cfg, reviewBAConnect(t, listen)
}

// reviewBABackup takes a backup as runBackup does (the consumers paused
// first, then jetstream.BackupStreams in order, each with backupOne, the
// consumers resumed, the manifest last), and runs before[name] just
// before the snapshot of stream name, after[name] just after it. A real
// backup of a store of any size has the same gaps (a large GRANTS or
// WEBHOOKS takes minutes); the hooks only make them deterministic.
func reviewBABackup(t *testing.T, c *jetstream.Conn, out string, before, after map[string]func()) backupManifest {
	t.Helper()
	ctx := t.Context()
	if err := os.MkdirAll(out, 0o700); err != nil {
		t.Fatal(err)
	}
	m := backupManifest{Format: backupFormat, Hookgate: buildVersion(), Server: c.NC.ConnectedServerVersion(), Started: time.Now().UTC()}
	paused, resume, err := pauseConsumers(ctx, &system{conn: c}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer resume()
	if len(paused) != 1 {
		t.Fatalf("paused %v, want the one serve", paused)
	}
	m.Paused = paused
	for _, name := range jetstream.BackupStreams {
		if f := before[name]; f != nil {
			f()
		}
		b, err := backupOne(ctx, c, out, name)
		if err != nil {
			t.Fatalf("backup %s: %v", name, err)
		}
		m.Streams = append(m.Streams, b)
		if f := after[name]; f != nil {
			f()
		}
	}
	resume()
	m.Finished = time.Now().UTC()
	if err := writeManifest(out, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// reviewBAAudit reads AUDIT's records of decision for key.
func reviewBAAudit(t *testing.T, c *jetstream.Conn, decision, key string) int {
	t.Helper()
	n := 0
	err := jetstream.Read(t.Context(), c, jetstream.StreamAudit, jetstream.Range{Filter: "audit." + decision + ".>"}, func(m jetstream.StoredMsg, _ uint64) error {
		if bytes.Contains(m.Body, []byte(`"key":"`+key+`"`)) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read AUDIT: %v", err)
	}
	return n
}

func reviewBAWait(t *testing.T, what string, s *review7Serve, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 30 s\n%s", what, tail(s.stderr.String(), 3000))
		}
	}
}

// reviewBAReceiver is a forward receiver that refuses (500) key fail
// until ok() is true, and records every request in order.
type reviewBAReceiver struct {
	mu   sync.Mutex
	log  []string // "key status"
	fail string
	ok   func() bool
	srv  *httptest.Server
}

func newReviewBAReceiver(t *testing.T, fail string, ok func() bool) *reviewBAReceiver {
	r := &reviewBAReceiver{fail: fail, ok: ok}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := req.Header.Get("Idempotency-Key")
		status := http.StatusOK
		if key == r.fail && !r.ok() {
			status = http.StatusInternalServerError
		}
		r.mu.Lock()
		r.log = append(r.log, fmt.Sprintf("%s %d", key, status))
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *reviewBAReceiver) seen(entry string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.log {
		if e == entry {
			n++
		}
	}
	return n
}

func (r *reviewBAReceiver) entries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// TestReviewBARestoreKeepsEachSubjectsOrder (review BA's first defect,
// reworked for the paused backup). The first design read the streams
// while the consumer applied: with WATERMARKS taken, a newer event of a
// subject (e2) was applied while an older one (e1) waited for its retry,
// so the backup held e2 in GRANTS but the mark from before it, and after
// the restore e1 was applied after e2 (forwarded after it; on a shared
// GRANTS subject published after it). Now the consumer is paused while
// the streams are read: e2, posted while the backup reads them, is not
// applied in the backup's world, and the restored store applies e1 and
// then e2, each subject in order, whatever the running system (resumed)
// did meanwhile. Expected, in the restored store: every
// event once in GRANTS, e1 before e2, and the receiver gets e1 before e2.
func TestReviewBARestoreKeepsEachSubjectsOrder(t *testing.T) {
	for _, tc := range []struct{ name, publish string }{
		{"sequenced", ""},
		{"shared-grants-subject", "      publish: \"grants.{provider}\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const k0, k1, k2 = "p:default:evt:e0", "p:default:evt:e1", "p:default:evt:e2"
			var e2done sync.Mutex
			e2posted := false
			recv := newReviewBAReceiver(t, k1, func() bool {
				e2done.Lock()
				defer e2done.Unlock()
				return e2posted
			})
			provider := "    effects:\n      forward: { url: \"" + recv.srv.URL + "\", timeout: 5s }\n" + tc.publish
			top := "consumer: { backoff: [2s] }\n"
			a, cfgA, c := reviewBAServe(t, provider, top)
			client := &http.Client{Timeout: 10 * time.Second}
			post := func(id string, at int) {
				body := fmt.Sprintf(`{"id":%q,"grant_id":"G-1","at":"2026-01-01T00:00:%02dZ"}`, id, at)
				if code, st, err := backupPost(client, a.base, body); err != nil || code != 200 || st != "accepted" {
					t.Fatalf("post %s: %d %q %v", id, code, st, err)
				}
			}
			post("e0", 0)
			reviewBAWait(t, "e0 applied", a, func() bool { return slices.Contains(streamKeys(t, c, jetstream.StreamGrants), k0) })
			post("e1", 1)
			reviewBAWait(t, "e1's first forward refused", a, func() bool { return recv.seen(k1+" 500") > 0 })

			out := filepath.Join(t.TempDir(), "backup")
			reviewBABackup(t, c, out, map[string]func(){
				// WATERMARKS and APPLIED are taken; GRANTS not yet.
				jetstream.StreamGrants: func() {
					if r := review9Run(t, "", "status", "--config", cfgA); !strings.Contains(r.stdout, "paused (backup)") {
						t.Errorf("status while the backup pauses the consumer does not say so:\n%s%s", r.stdout, r.stderr)
					}
					post("e2", 2)
					e2done.Lock()
					e2posted = true
					e2done.Unlock()
				},
			}, nil)
			// Resumed, the running system applies e2, and e1 either
			// before it (its retry came due during the pause) or not at
			// all (stale, superseded while retrying).
			reviewBAWait(t, "e2 applied after the backup", a, func() bool { return slices.Contains(streamKeys(t, c, jetstream.StreamGrants), k2) })
			reviewBAWait(t, "e1 decided", a, func() bool {
				return reviewBAAudit(t, c, "stale", k1) > 0 || slices.Contains(streamKeys(t, c, jetstream.StreamGrants), k1)
			})
			if err := a.stop(t); err != nil {
				t.Fatal(err)
			}
			before := len(recv.entries())

			listenB := review9gFreeAddr(t)
			cfgB := reviewBAConfig(t, filepath.Join(t.TempDir(), "b"), listenB, provider, top)
			if r := review9Run(t, "", "restore", "--config", cfgB, "--from", out); r.code != 0 {
				t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			b := review7Start(t, cfgB, true)
			cb := reviewBAConnect(t, listenB)
			reviewBAWait(t, "e2 applied on the restored store", b, func() bool { return slices.Contains(streamKeys(t, cb, jetstream.StreamGrants), k2) })
			waitApplied(t, cb, b)

			after := recv.entries()[before:]
			grants := streamKeys(t, cb, jetstream.StreamGrants)
			t.Logf("forwards after the restore: %v; restored GRANTS after it: %v", after, grants)
			if want := []string{k0, k1, k2}; !slices.Equal(grants, want) {
				t.Errorf("restored GRANTS %v, want %v: each event once, in its subject's order", grants, want)
			}
			if i1, i2 := slices.Index(after, k1+" 200"), slices.Index(after, k2+" 200"); i1 < 0 || i2 < 0 || i1 > i2 {
				t.Errorf("after the restore the receiver got %v: want e1 forwarded, then e2", after)
			}
		})
	}
}

// reviewBABackedUp starts a serve, posts n events, waits until they are
// applied and backs the store up; it returns the serve (running), its
// config and the backup's directory.
func reviewBABackedUp(t *testing.T, n int) (a *review7Serve, cfgA, good string) {
	t.Helper()
	a, cfgA, c := reviewBAServe(t, "", "")
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		_, body := backupEvent(i)
		if code, _, err := backupPost(client, a.base, body); err != nil || code != 200 {
			t.Fatalf("post: %d %v", code, err)
		}
	}
	waitApplied(t, c, a)
	good = filepath.Join(t.TempDir(), "backup")
	if r := review9Run(t, "", "backup", "--config", cfgA, "--out", good); r.code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return a, cfgA, good
}

// TestReviewBARestoreRunsAgainAfterAFailedOne (review BA's defect, fixed:
// a failed embedded restore empties data_dir again). A restore that
// fails half way said "removed ... restored before it, so restore can run
// again", but on an embedded data_dir restore cannot run again: the
// failed run's embedded server left its store files in data_dir, and
// restore then refuses data_dir as "not empty"). Here the backup's AUDIT
// snapshot is cut short (its manifest entry matching it, as a disk full
// while writing it, or a copy cut short and re-hashed, gives) so the
// server refuses it after WATERMARKS, APPLIED, GRANTS, WEBHOOKS and DLQ
// were restored; a Ctrl-C half way does the same. Expected: the second
// restore, from a good backup, onto the same data_dir succeeds (restore
// removes what it made in data_dir, or accepts a data_dir holding no
// hookgate stream).
func TestReviewBARestoreRunsAgainAfterAFailedOne(t *testing.T) {
	a, _, good := reviewBABackedUp(t, 20)
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	bad := filepath.Join(t.TempDir(), "cut")
	if err := os.CopyFS(bad, os.DirFS(good)); err != nil {
		t.Fatal(err)
	}
	var m backupManifest
	data, err := os.ReadFile(filepath.Join(bad, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for i, s := range m.Streams {
		if s.Name != jetstream.StreamAudit {
			continue
		}
		p := filepath.Join(bad, s.File)
		snap, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		snap = snap[:len(snap)/2]
		if err := os.WriteFile(p, snap, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(snap)
		m.Streams[i].Bytes, m.Streams[i].SHA256 = int64(len(snap)), hex.EncodeToString(sum[:])
	}
	if err := os.Remove(filepath.Join(bad, manifestFile)); err != nil {
		t.Fatal(err)
	}
	if err := writeManifest(bad, m); err != nil {
		t.Fatal(err)
	}

	dirB := filepath.Join(t.TempDir(), "b")
	cfgB := reviewBAConfig(t, dirB, "", "", "")
	r := review9Run(t, "", "restore", "--config", cfgB, "--from", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "so restore can run again") {
		t.Fatalf("restore of a cut-short AUDIT: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("first restore: %s", strings.TrimSpace(r.stderr))
	r = review9Run(t, "", "restore", "--config", cfgB, "--from", good)
	if r.code != 0 {
		entries, _ := os.ReadDir(dirB)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("restore again after the failed one said it can run again: exit %d\n%s%s(data_dir holds %v)", r.code, r.stdout, r.stderr, names)
	}
}

// TestReviewBADlqReplayDuringBackupLosesTheEvent (review BA's defect,
// fixed: DLQ is read first; since then, too, a dlq replay refuses to run
// during a backup). In the first design DLQ was taken last, after GRANTS and
// WEBHOOKS. A dead-lettered event is acknowledged (at or below the floor
// read first: never delivered again after the restore), and its only
// record is its letter. `hookgate dlq replay` run while the backup runs
// (here: right after WEBHOOKS is taken, before DLQ) applies the
// event (GRANTS, mark) and then removes its letter: the backup holds
// neither its GRANTS message nor its letter, and the restored consumer
// does not deliver it. Expected: the restored store has the event in
// GRANTS or its letter in DLQ (take DLQ right after the floor, before
// WATERMARKS: a letter removed later is still in the backup, and its
// replay there is told already-applied or applies it).
func TestReviewBADlqReplayDuringBackupLosesTheEvent(t *testing.T) {
	const k1 = "p:default:evt:e1"
	var mu sync.Mutex
	fixed := false
	recv := newReviewBAReceiver(t, k1, func() bool { mu.Lock(); defer mu.Unlock(); return fixed })
	provider := "    effects:\n      forward: { url: \"" + recv.srv.URL + "\", timeout: 5s }\n"
	top := "consumer: { max_deliver: 1 }\n"
	a, cfgA, c := reviewBAServe(t, provider, top)
	client := &http.Client{Timeout: 10 * time.Second}
	for i, id := range []string{"e0", "e1", "e2"} {
		body := fmt.Sprintf(`{"id":%q,"grant_id":"G-%d","at":"2026-01-01T00:00:00Z"}`, id, i)
		if code, st, err := backupPost(client, a.base, body); err != nil || code != 200 || st != "accepted" {
			t.Fatalf("post %s: %d %q %v", id, code, st, err)
		}
	}
	waitApplied(t, c, a)
	// AUDIT is written after the ack, by a writer of its own.
	reviewBAWait(t, "e1's dead-lettered record", a, func() bool { return reviewBAAudit(t, c, "dead-lettered", k1) == 1 })
	out := filepath.Join(t.TempDir(), "backup")
	reviewBABackup(t, c, out, nil, map[string]func(){
		// GRANTS and WEBHOOKS are taken (and, in this order, DLQ not yet).
		jetstream.StreamWebhooks: func() {
			mu.Lock()
			fixed = true
			mu.Unlock()
			// Since the backup announces itself, a dlq replay during it
			// is refused and changes nothing (TestReplayAndBackupRefuseEachOther);
			// DLQ read first still holds where the announcement cannot be
			// heard (NATS permissions that deny its subjects).
			r := review9Run(t, "", "dlq", "replay", "--all", "--config", cfgA)
			if r.code != 1 || !strings.Contains(r.stderr, "a hookgate backup is reading the streams") {
				t.Fatalf("dlq replay during the backup: exit %d, want it refused\n%s%s", r.code, r.stdout, r.stderr)
			}
		},
	})
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	listenB := review9gFreeAddr(t)
	cfgB := reviewBAConfig(t, filepath.Join(t.TempDir(), "b"), listenB, provider, top)
	if r := review9Run(t, "", "restore", "--config", cfgB, "--from", out); r.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b := review7Start(t, cfgB, true)
	cb := reviewBAConnect(t, listenB)
	waitApplied(t, cb, b)
	stored := streamKeys(t, cb, jetstream.StreamWebhooks)
	grants := streamKeys(t, cb, jetstream.StreamGrants)
	letters := streamKeys(t, cb, jetstream.StreamDLQ)
	t.Logf("restored WEBHOOKS %v GRANTS %v DLQ %v", stored, grants, letters)
	hasLetter := slices.ContainsFunc(letters, func(id string) bool { return id == k1 || strings.HasPrefix(id, k1+"|") })
	if slices.Contains(stored, k1) && !slices.Contains(grants, k1) && !hasLetter {
		t.Errorf("e1 is in the restored WEBHOOKS but neither in GRANTS nor in DLQ, and the consumer does not deliver it: lost")
	}
}

// TestReviewBARestoreAfterTheHorizonAppliesAgain (review BA's defect,
// fixed: with the consumer paused, the backup's consumer state is of the
// same moment as the streams, and nothing is reset). In the first design,
// at the restore the consumer was reset to the floor unconditionally,
// so every event above it that the running system had already applied is
// decided again. Under `ordering: none` only the applied keys tell such an
// event (APPLIED, whose entries expire after dedup.horizon, and GRANTS's
// duplicate window of the horizon), and both count from when it was
// applied, not from the restore: a backup restored more than the horizon
// after it was taken (last week's backup after a disk loss) applies those
// events again, a second GRANTS message and forward. serve's own reset at
// start refuses exactly this case (first event above the floor stored more
// than half the horizon ago, review's ordering: none finding); restore
// has no such guard. Here the horizon is 3 s: e1 is being retried (its
// forward refused) when the backup is taken, so e2, applied after it, is
// above the floor; the backup is restored 4 s later. Expected: e2 once in
// GRANTS (or restore refuses/warns and does not redeliver applied events
// past the horizon).
func TestReviewBARestoreAfterTheHorizonAppliesAgain(t *testing.T) {
	const k1, k2 = "p:default:evt:e1", "p:default:evt:e2"
	var mu sync.Mutex
	fixed := false
	recv := newReviewBAReceiver(t, k1, func() bool { mu.Lock(); defer mu.Unlock(); return fixed })
	provider := "    ordering: none\n    effects:\n      forward: { url: \"" + recv.srv.URL + "\", timeout: 5s }\n"
	top := "dedup: { horizon: 3s, window: 1s }\nconsumer: { backoff: [20s] }\n"
	a, cfgA, c := reviewBAServe(t, provider, top)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(base, id string) {
		body := fmt.Sprintf(`{"id":%q,"grant_id":"G-1","at":"2026-01-01T00:00:00Z"}`, id)
		if code, st, err := backupPost(client, base, body); err != nil || code != 200 || st != "accepted" {
			t.Fatalf("post %s: %d %q %v", id, code, st, err)
		}
	}
	post(a.base, "e1")
	reviewBAWait(t, "e1's forward refused", a, func() bool { return recv.seen(k1+" 500") > 0 })
	post(a.base, "e2")
	reviewBAWait(t, "e2 applied", a, func() bool { return reviewBAAudit(t, c, "applied", k2) > 0 })
	// Its ack on the server: only e1, waiting out its retry, unacknowledged.
	reviewBAWait(t, "e2's ack", a, func() bool {
		ci, err := c.JS.Consumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			return false
		}
		info, err := ci.Info(t.Context())
		return err == nil && info.Delivered.Stream >= 2 && info.NumPending == 0 && info.NumAckPending == 1
	})
	out := filepath.Join(t.TempDir(), "backup")
	if r := review9Run(t, "", "backup", "--config", cfgA, "--out", out); r.code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	fixed = true
	mu.Unlock()
	time.Sleep(4 * time.Second) // the backup is older than the horizon

	listenB := review9gFreeAddr(t)
	cfgB := reviewBAConfig(t, filepath.Join(t.TempDir(), "b"), listenB, provider, top)
	r := review9Run(t, "", "restore", "--config", cfgB, "--from", out)
	if r.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b := review7Start(t, cfgB, true)
	cb := reviewBAConnect(t, listenB)
	waitApplied(t, cb, b)
	grants := streamKeys(t, cb, jetstream.StreamGrants)
	t.Logf("restore: %s\nGRANTS after the restore: %v; forwards: %v", r.stdout, grants, recv.entries())
	if n := len(slices.DeleteFunc(slices.Clone(grants), func(k string) bool { return k != k2 })); n != 1 {
		t.Errorf("e2, applied before the backup, is %d times in GRANTS after the restore (want 1)", n)
	}
	if !slices.Contains(grants, k1) {
		t.Errorf("e1 was not applied after the restore")
	}
}

// A restore killed part way (kill -9, or a second Ctrl-C while it cleaned
// up) left the streams restored so far and a partial WEBHOOKS; serve ran
// on them with PROBLEMS none, the backup's unapplied events gone (an
// operator tools audit, stop 40). Restore now marks data_dir unfinished
// until its last stream is in: what a kill leaves (the streams, the mark)
// is refused by serve and every command, and by a second restore with
// what to do; a restore that finished leaves no mark. A restore aimed at
// a running serve's data_dir names the process instead of advising to
// move the directory. (The e2e TestRestoreKilledDuringWebhooksIsRefused
// kills a real restore.)
func TestRestoreKilledPartWayIsRefused(t *testing.T) {
	a, cfgA, good := reviewBABackedUp(t, 5)
	if r := review9Run(t, "", "restore", "--config", cfgA, "--from", good); r.code != 1 || !strings.Contains(r.stderr, "is in use by process") {
		t.Errorf("restore onto the running serve's data_dir: exit %d, want 1 naming the process that holds it\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	dirB := filepath.Join(t.TempDir(), "b")
	cfgB := reviewBAConfig(t, dirB, "", "", "")
	if r := review9Run(t, "", "restore", "--config", cfgB, "--from", good); r.code != 0 || strings.Contains(r.stdout, "new nats.token") {
		t.Fatalf("restore (its config sets the token: no new one): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mark := filepath.Join(dirB, jetstream.RestoreMarkFile)
	if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a finished restore left its mark %s (%v)", mark, err)
	}
	// What a kill between two streams leaves: the streams so far, and the
	// mark.
	if err := os.WriteFile(mark, []byte("hookgate restore began and has not finished\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb lockedBuf
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"serve", "--config", cfgB}, func(string) string { return "" }, nil, &out, &errb)
	if !errors.Is(err, jetstream.ErrUnfinishedRestore) || ctx.Err() != nil {
		t.Errorf("serve on a data_dir whose restore did not finish: %v (within 30 s: %v), want it refused\n%s", err, ctx.Err() == nil, errb.String())
	}
	if r := review9Run(t, "", "status", "--config", cfgB); r.code != 1 || !strings.Contains(r.stderr, "holds a restore that did not finish") || !strings.Contains(r.stderr, "run hookgate restore again") {
		t.Errorf("status on it: exit %d, want 1 saying so\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := review9Run(t, "", "restore", "--config", cfgB, "--from", good); r.code != 1 || !strings.Contains(r.stderr, "holds a restore that did not finish (stopped part way): empty it") {
		t.Errorf("restore onto it: exit %d, want 1 saying to empty it first\n%s%s", r.code, r.stdout, r.stderr)
	}
}
