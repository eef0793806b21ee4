package e2e

import (
	"encoding/json"
	"os"
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
