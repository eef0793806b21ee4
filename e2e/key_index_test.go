package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEmbeddedKeysStayDuplicatesBeyondTheWindowAcrossRestarts: on the
// embedded server WEBHOOKS's own duplicate window is dedup.window (1 s
// here) and the gateway's key index holds the keys over the horizon. A
// repeat sent after the window, across a kill -9 (the index is read back
// from the stream) and a clean stop (from its snapshot), is answered
// duplicate and stored once.
func TestEmbeddedKeysStayDuplicatesBeyondTheWindowAcrossRestarts(t *testing.T) {
	const window = time.Second
	e := newEnv(t, "")
	f, err := os.OpenFile(e.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("dedup: { horizon: 1h, window: 1s }\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()

	type sent struct {
		id   string
		body []byte
		key  string
		at   time.Time
	}
	send := func(hg *instance, s *sent, want string) {
		t.Helper()
		r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, s.id, s.body), s.body)
		var a struct{ Status, Key string }
		_ = json.Unmarshal([]byte(r.body), &a)
		if r.status != 200 || a.Status != want {
			t.Fatalf("%s: %d %s, want 200 %s\n%s", s.id, r.status, r.body, want, hg.stderr)
		}
		if s.key == "" {
			s.key, s.at = a.Key, time.Now()
		}
	}
	// The server re-reads at start only the messages inside its window:
	// wait until an event is older than it by a margin, so that after the
	// restart only the index can know its key.
	olderThanWindow := func(s *sent) {
		t.Helper()
		waitFor(t, s.id+" older than 3x the window", 10*time.Second, func() bool { return time.Since(s.at) > 3*window })
	}
	a := &sent{id: "msg_keep_a", body: []byte(`{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)}
	b := &sent{id: "msg_keep_b", body: []byte(`{"grant_id":"G-2","type":"t","occurred_at":"2026-11-30T10:00:01Z"}`)}

	hg := start(t, e.cfgPath)
	send(hg, a, "accepted")
	olderThanWindow(a)
	send(hg, a, "duplicate") // the running process
	hg.kill()
	hg = start(t, e.cfgPath)
	send(hg, a, "duplicate") // read back from WEBHOOKS after the kill
	send(hg, b, "accepted")
	olderThanWindow(b)
	hg.stop(t)
	hg = start(t, e.cfgPath)
	send(hg, a, "duplicate") // from the snapshot written at the stop
	send(hg, b, "duplicate")

	j := natsClient(t, e.natsURL, natsToken)
	seen := map[string]int{}
	for _, k := range storedKeys(t, j) {
		seen[k]++
	}
	if seen[a.key] != 1 || seen[b.key] != 1 || len(seen) != 2 {
		t.Fatalf("stored keys %v, want %s and %s once each", seen, a.key, b.key)
	}
}

// TestEmbeddedUpgradeTakesWebhooksWhileTheKeyIndexReadsBack: a data_dir of
// the release before the key index (WEBHOOKS unmarked, its window the
// horizon, no snapshot) is taken over without a pause: serve listens at
// once with the server's horizon-long window, reads the keys back, puts
// the index in front and narrows the window; a key stored before the
// upgrade stays a duplicate throughout and after a restart.
func TestEmbeddedUpgradeTakesWebhooksWhileTheKeyIndexReadsBack(t *testing.T) {
	e := newEnv(t, "")
	f, err := os.OpenFile(e.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("dedup: { horizon: 1h, window: 1s }\nroles: { consumer: false }\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	body := []byte(`{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	send := func(hg *instance, want string) string {
		t.Helper()
		r := post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "msg_before_upgrade", body), body)
		var a struct{ Status, Key string }
		_ = json.Unmarshal([]byte(r.body), &a)
		if r.status != 200 || a.Status != want {
			t.Fatalf("%d %s, want 200 %s\n%s", r.status, r.body, want, hg.stderr)
		}
		return a.Key
	}

	hg := start(t, e.cfgPath)
	key := send(hg, "accepted")
	// Make it the previous release's store: more events (the read-back
	// takes a moment), WEBHOOKS unmarked with a horizon-long window, and
	// (after the stop) no snapshot.
	j := natsClient(t, e.natsURL, natsToken)
	ctx := t.Context()
	publishAll(t, j, 20000, time.Minute, func(i int) (string, []byte, string) {
		return "webhooks.grants.default", body, fmt.Sprintf("grants:default:evt:old_%d", i)
	})
	s, err := j.Stream(ctx, "WEBHOOKS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Duplicates, cfg.Metadata = time.Hour, nil
	if _, err := j.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	hg.stop(t)
	if err := os.Remove(filepath.Join(e.dir, "data", "webhooks-keys.idx")); err != nil {
		t.Fatal(err)
	}

	hg = start(t, e.cfgPath)
	// stderr is copied by its own goroutine: the line may follow stdout's
	// listening line (a CI run looked too early).
	waitFor(t, "serve taking the upgrade path (stderr: not kept by a key index yet)", 10*time.Second, func() bool {
		return strings.Contains(hg.stderr.String(), "not kept by a key index yet")
	})
	send(hg, "duplicate") // at once: the server's horizon-long window, or the index
	window := func() (time.Duration, string) {
		s, err := j.Stream(ctx, "WEBHOOKS")
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		return c.Duplicates, c.Metadata["hookgate_key_index"]
	}
	waitFor(t, "WEBHOOKS's window narrowed to dedup.window and marked", 60*time.Second, func() bool {
		d, mark := window()
		return d == time.Second && mark == "true"
	})
	send(hg, "duplicate")
	hg.stop(t)
	hg = start(t, e.cfgPath)
	send(hg, "duplicate") // from the snapshot, the server's window now 1 s
	seen := 0
	for _, k := range storedKeys(t, j) {
		if k == key {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("%s stored %d times, want once", key, seen)
	}
}
