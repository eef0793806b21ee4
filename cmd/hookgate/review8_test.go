package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/keyindex"
	js "github.com/nats-io/nats.go/jetstream"
)

// review8WaitReading waits until an ordered consumer on WEBHOOKS (the key
// index's read-back) has delivered something but not everything: the
// read is under way.
func review8WaitReading(t *testing.T, s js.Stream, total uint64) uint64 {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		l := s.ListConsumers(t.Context())
		for ci := range l.Info() {
			if d := ci.Delivered.Stream; d > 0 && d < total {
				return d
			}
		}
	}
	t.Fatal("the key index's read-back was not seen under way in 20 s")
	return 0
}

// review8ReadBack returns the read_back count of the last "key index
// ready" log line (-1: none).
func review8ReadBack(stderr string) int64 {
	var n int64 = -1
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.Contains(l, `"msg":"key index ready"`) {
			continue
		}
		var rec struct {
			ReadBack int64 `json:"read_back"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil {
			n = rec.ReadBack
		}
	}
	return n
}

// TestReview8StopWhileTheKeyIndexOpensResumes: a SIGTERM while serve's key
// index reads a kept WEBHOOKS back (no snapshot): serve stops promptly and
// cleanly without printing the listening line, leaves a valid snapshot
// of what it read (every key up to its frontier), and the next start goes
// on from there; old keys are duplicates, a new one is accepted once.
func TestReview8StopWhileTheKeyIndexOpensResumes(t *testing.T) {
	dataDir, natsListen, httpListen := t.TempDir(), freeAddr(t), freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, httpListen, "")
	const events = 30000
	review7Store(t, cfgPath, events).Close()

	s := review7Start(t, cfgPath, false)
	for end := time.Now().Add(20 * time.Second); !strings.Contains(s.stderr.String(), "no key index snapshot: reading"); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no read-back began\n%s", tail(s.stderr.String(), 1500))
		}
	}
	wh := review7Webhooks(t, natsListen)
	streamID := wh.CachedInfo().Created.UTC().Format(time.RFC3339Nano)
	delivered := review8WaitReading(t, wh, events)
	if strings.Contains(s.stderr.String(), `"msg":"key index ready"`) {
		t.Skip("the read-back ended before the stop (a fast machine); nothing shown")
	}
	began := time.Now()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve stopped during the open with %v, want nil (a SIGTERM)", err)
	}
	took := time.Since(began)
	if took > 5*time.Second {
		t.Errorf("serve took %s to stop while the key index opened", took)
	}
	if strings.Contains(s.stdout.String(), "listening on") {
		t.Errorf("the listening line was printed although the index never opened:\n%s", s.stdout.String())
	}
	if strings.Contains(s.stderr.String(), `"msg":"key index ready"`) {
		t.Skip("the read-back ended before the stop took effect; nothing shown")
	}
	x, snap, err := keyindex.ReadFile(filepath.Join(dataDir, keyIndexFile), streamID, 96*time.Hour) // the default dedup.horizon
	if err != nil {
		t.Fatalf("no usable snapshot after a stop during the read-back (consumer had delivered %d): %v\n%s", delivered, err, tail(s.stderr.String(), 1500))
	}
	if snap.Frontier == 0 || snap.Frontier >= events {
		t.Fatalf("partial snapshot frontier %d of %d", snap.Frontier, events)
	}
	for i := range int(snap.Frontier) {
		if _, ok := x.Lookup(fmt.Sprintf("p:default:evt:bulk-%d", i)); !ok {
			t.Fatalf("partial snapshot (frontier %d) lacks key %d", snap.Frontier, i)
		}
	}
	if snap.Keys != int(snap.Frontier) {
		t.Errorf("partial snapshot holds %d keys for frontier %d", snap.Keys, snap.Frontier)
	}
	t.Logf("stopped in %s; snapshot frontier %d of %d", took.Round(time.Millisecond), snap.Frontier, events)

	t1 := time.Now()
	s = review7Start(t, cfgPath, true)
	t.Logf("restart %s", time.Since(t1))
	if rb := review8ReadBack(s.stderr.String()); rb != int64(events)-int64(snap.Frontier) {
		t.Errorf("the next start read back %d events, want %d (from the saved frontier %d)", rb, events-int(snap.Frontier), snap.Frontier)
	}
	for _, id := range []string{"bulk-0", fmt.Sprintf("bulk-%d", snap.Frontier-1), fmt.Sprintf("bulk-%d", snap.Frontier), fmt.Sprintf("bulk-%d", events-1)} {
		review7MustSend(t, s.base, id, "duplicate")
	}
	review7MustSend(t, s.base, "fresh", "accepted")
	review7MustSend(t, s.base, "fresh", "duplicate")
	if n := review7Webhooks(t, natsListen).CachedInfo().State.Msgs; n != events+1 {
		t.Errorf("WEBHOOKS holds %d events, want %d (every key once)", n, events+1)
	}
}

// TestReview8UpgradeStoppedMidReadResumes: the upgrade path (WEBHOOKS
// unmarked, its window the horizon): serve takes webhooks through the
// plain publisher while the index reads back; a SIGTERM mid-read saves
// what was read (WEBHOOKS stays "pending"); the next start is an upgrade
// again, goes on from the saved frontier, narrows the window, and every
// key stored before (the bulk and those accepted during the first read)
// stays a duplicate, stored once, also after the narrowed window passed.
func TestReview8UpgradeStoppedMidReadResumes(t *testing.T) {
	dataDir, natsListen, httpListen := t.TempDir(), freeAddr(t), freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, httpListen, "dedup: { horizon: 1h, window: 2s }\n")
	// The previous release's store: WEBHOOKS unmarked, window = horizon.
	const events = 30000
	sys := review7Store(t, cfgPath, events)
	st, err := sys.conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	sc.Duplicates, sc.Metadata = time.Hour, nil
	if _, err := sys.conn.JS.UpdateStream(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	sys.Close()

	s := review7Start(t, cfgPath, true) // the upgrade listens at once
	if !strings.Contains(s.stderr.String(), "not kept by a key index yet") {
		t.Fatalf("setup: not the upgrade path\n%s", tail(s.stderr.String(), 1500))
	}
	wh := review7Webhooks(t, natsListen)
	streamID := wh.CachedInfo().Created.UTC().Format(time.RFC3339Nano)
	review8WaitReading(t, wh, events)
	review7MustSend(t, s.base, "during-1", "accepted")
	review7MustSend(t, s.base, "bulk-5", "duplicate") // the server's horizon-long window
	if strings.Contains(s.stderr.String(), `"msg":"key index ready"`) {
		t.Skip("the read-back ended before the stop; nothing shown")
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if strings.Contains(s.stderr.String(), `"msg":"key index ready"`) {
		t.Skip("the read-back ended before the stop took effect; nothing shown")
	}
	_, snap, err := keyindex.ReadFile(filepath.Join(dataDir, keyIndexFile), streamID, time.Hour)
	if err != nil || snap.Frontier == 0 || snap.Frontier >= events {
		t.Fatalf("partial snapshot after a stop mid-read on the upgrade path: %+v, %v\n%s", snap, err, tail(s.stderr.String(), 1500))
	}

	review8Status(t, cfgPath, "pending", filepath.Join(dataDir, keyIndexFile))
	s = review7Start(t, cfgPath, true)
	if !strings.Contains(s.stderr.String(), "not kept by a key index yet") {
		t.Errorf("the second start is not an upgrade (WEBHOOKS was pending)\n%s", tail(s.stderr.String(), 1500))
	}
	ids := []string{"bulk-0", fmt.Sprintf("bulk-%d", snap.Frontier-1), fmt.Sprintf("bulk-%d", snap.Frontier), fmt.Sprintf("bulk-%d", events-1), "during-1"}
	for _, id := range ids {
		review7MustSend(t, s.base, id, "duplicate")
	}
	review7MustSend(t, s.base, "during-2", "accepted")
	for end := time.Now().Add(20 * time.Second); !strings.Contains(s.stderr.String(), "duplicate window narrowed"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("WEBHOOKS not narrowed in 20 s\n%s", tail(s.stderr.String(), 1500))
		}
	}
	if rb := review8ReadBack(s.stderr.String()); rb < 0 || rb >= events {
		t.Errorf("the second start read back %d events: it did not go on from the saved frontier %d", rb, snap.Frontier)
	}
	narrowed := time.Now()
	for time.Since(narrowed) < 3*time.Second { // past the 2 s window
		review7MustSend(t, s.base, "during-2", "duplicate")
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range append(ids, "during-2") {
		review7MustSend(t, s.base, id, "duplicate")
	}
	if n := review7Webhooks(t, natsListen).CachedInfo().State.Msgs; n != events+2 {
		t.Errorf("WEBHOOKS holds %d events, want %d (every key once)", n, events+2)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	review8Status(t, cfgPath, "kept", filepath.Join(dataDir, keyIndexFile))
	s = review7Start(t, cfgPath, true)
	if strings.Contains(s.stderr.String(), "not kept by a key index yet") {
		t.Errorf("third start: still an upgrade")
	}
	for _, id := range append(ids, "during-2") {
		review7MustSend(t, s.base, id, "duplicate")
	}
}

// review8Status runs status --json (from data_dir) and checks the dedup
// fields the README names.
func review8Status(t *testing.T, cfgPath, keyIndex, snapPath string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"status", "--config", cfgPath, "--json"}, func(string) string { return "" }, nil, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	var doc struct {
		Dedup struct {
			KeyIndex string `json:"key_index"`
			Snapshot *struct {
				Path    string `json:"path"`
				Bytes   int64  `json:"bytes"`
				Written string `json:"written"`
			} `json:"key_index_snapshot"`
		} `json:"dedup"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out.String())
	}
	if doc.Dedup.KeyIndex != keyIndex {
		t.Errorf("status --json dedup.key_index %q, want %q", doc.Dedup.KeyIndex, keyIndex)
	}
	sn := doc.Dedup.Snapshot
	if sn == nil || sn.Path != snapPath || sn.Bytes <= 0 {
		t.Fatalf("status --json dedup.key_index_snapshot %+v, want path %s and its size\n%s", sn, snapPath, out.String())
	}
	if w, err := time.Parse(time.RFC3339, sn.Written); err != nil || w.Location() != time.UTC || time.Since(w) > time.Minute {
		t.Errorf("key_index_snapshot.written %q: %v", sn.Written, err)
	}
}

// The consumer does not wait for the gateway's key index: while a long
// read-back keeps webhooks answered 503, the backlog already stored is
// being applied.
func TestConsumerRunsWhileTheKeyIndexOpens(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", dataDir, natsListen, review6Provider)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const events = 30000
	review7Store(t, cfgPath, events).Close()

	s := review7Start(t, cfgPath, false)
	opening := func() bool {
		e := s.stderr.String()
		return strings.Contains(e, "no key index snapshot: reading") && !strings.Contains(e, `"msg":"key index ready"`)
	}
	for end := time.Now().Add(20 * time.Second); !opening(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) || strings.Contains(s.stderr.String(), `"msg":"key index ready"`) {
			t.Skip("the key index's read-back was not seen under way; nothing shown")
		}
	}
	wh := review7Webhooks(t, natsListen)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		c, err := wh.Consumer(t.Context(), jetstream.DurableApply)
		if err != nil {
			continue // not created yet
		}
		info, err := c.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		delivered := info.Delivered.Stream
		if !opening() {
			if delivered == 0 {
				t.Fatalf("the key index opened before the consumer took any event\n%s", tail(s.stderr.String(), 1500))
			}
			t.Skip("the read-back ended before a delivery was seen during it; nothing shown")
		}
		if delivered > 0 {
			return // delivered while the index was still opening
		}
	}
	t.Fatal("no event delivered to the consumer within 20 s of the key index opening")
}
