package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// review7Serve is one `hookgate serve` run through the real run function.
type review7Serve struct {
	base    string
	cfgPath string
	stdout  *lockedBuf
	stderr  *lockedBuf
	cancel  context.CancelFunc
	done    chan error
}

// review7Config writes a config for an embedded hookgate (gateway only, the
// review6 hmac provider) on dataDir/listen with extra YAML lines.
func review7Config(t *testing.T, dataDir, natsListen, httpListen, extra string) string {
	t.Helper()
	if httpListen == "" {
		httpListen = "127.0.0.1:0"
	}
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: %q }\nroles: { consumer: false }\n%snats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		httpListen, extra, dataDir, natsListen, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// review7Start runs serve and waits for its listening line (or, with
// wait false, returns at once).
func review7Start(t *testing.T, cfgPath string, wait bool) *review7Serve {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &review7Serve{cfgPath: cfgPath, stdout: &lockedBuf{}, stderr: &lockedBuf{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- run(ctx, []string{"serve", "--config", cfgPath}, func(string) string { return "" }, nil, s.stdout, s.stderr)
	}()
	t.Cleanup(func() { s.stop(t) })
	if !wait {
		return s
	}
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	for end := time.Now().Add(25 * time.Second); ; {
		if m := re.FindStringSubmatch(s.stdout.String()); m != nil {
			s.base = m[1]
			return s
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve exited before listening: %v\n%s", err, tail(s.stderr.String(), 2000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("serve not listening in 25 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
}

// stop is SIGTERM: cancel run's context and wait for it to return.
func (s *review7Serve) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(40 * time.Second):
		t.Fatalf("serve did not stop within 40 s\n%s", tail(s.stderr.String(), 2000))
	}
	return nil
}

// review7Send posts one signed event; it returns the HTTP status and the
// answer's status field ("" when none).
func review7Send(client *http.Client, base, id string) (int, string, error) {
	req, err := review7Request(base, id)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct{ Status string }
	_ = json.Unmarshal(b, &a)
	return resp.StatusCode, a.Status, nil
}

// review7Request is review7Send's signed request.
func review7Request(base, id string) (*http.Request, error) {
	body := fmt.Sprintf(`{"id":%q,"grant_id":"g-%s","at":"2026-12-01T10:00:00Z"}`, id, id)
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		return nil, err
	}
	h, err := sch.Sign([]byte(body), config.Secret(review6Secret), "", time.Now())
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/p", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

func review7MustSend(t *testing.T, base, id, want string) {
	t.Helper()
	code, st, err := review7Send(&http.Client{Timeout: 20 * time.Second}, base, id)
	if err != nil || code != 200 || st != want {
		t.Fatalf("%s: %d %q %v, want 200 %q", id, code, st, err, want)
	}
}

// review7Bulk stores n keyed events p:default:evt:<prefix>-<i> in WEBHOOKS
// through sys (as a previous run of the gateway would have).
func review7Bulk(t *testing.T, sys *system, prefix string, n int) {
	t.Helper()
	body := bytes.Repeat([]byte("x"), 200)
	for i := range n {
		m := nats.NewMsg("webhooks.p.default")
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("p:default:evt:%s-%d", prefix, i))
		m.Data = body
		if _, err := sys.conn.JS.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 || i == n-1 {
			select {
			case <-sys.conn.JS.PublishAsyncComplete():
			case <-time.After(20 * time.Second):
				t.Fatal("setup: async publishes not acknowledged in 20 s")
			}
		}
	}
}

// review7Store opens data_dir as serve would (its streams provisioned)
// and stores n keyed events p:default:evt:bulk-<i> in WEBHOOKS; the caller
// may change WEBHOOKS through sys before closing it.
func review7Store(t *testing.T, cfgPath string, n int) *system {
	t.Helper()
	cfg, err := loadConfig(cfgPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	sys, err := openSystem(t.Context(), cfg, slog.New(slog.DiscardHandler), "setup", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	review7Bulk(t, sys, "bulk", n)
	return sys
}

// review7Webhooks connects to the embedded server's listen address and
// looks WEBHOOKS up; the connection closes with the test.
func review7Webhooks(t *testing.T, natsListen string) js.Stream {
	t.Helper()
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "review7", URL: "nats://" + natsListen, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := c.JS.Stream(t.Context(), jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// review7Stored returns WEBHOOKS's message count per Nats-Msg-Id.
func review7Stored(t *testing.T, natsListen string) map[string]int {
	t.Helper()
	s := review7Webhooks(t, natsListen)
	st := s.CachedInfo().State
	seen := map[string]int{}
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("WEBHOOKS seq %d: %v", seq, err)
		}
		seen[m.Header.Get(nats.MsgIdHdr)]++
	}
	return seen
}

// TestReview7FailedSnapshotIsRetriedEveryTick: when the key index's
// snapshot cannot be written (here a directory sits at
// data_dir/webhooks-keys.idx; the same holds for a data_dir that is not
// writable or a full disk), serve starts and keeps both dedup promises (it
// reads the horizon back), but Run retries the snapshot at every tick (a
// sixteenth of dedup.window, at most 1 s), because a failed write leaves
// savedAt at its old value: each retry rewrites and fsyncs every key to a
// temporary file and logs a warning. README: "while running, at most every
// 2 minutes". At 35 M keys that is an 840 MB write and fsync a second, and
// 86 400 warnings a day.
func TestReview7FailedSnapshotIsRetriedEveryTick(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	if err := os.Mkdir(filepath.Join(dataDir, keyIndexFile), 0o755); err != nil {
		t.Fatal(err)
	}
	// The default dedup.window (2m): a tick of 1 s.
	s := review7Start(t, review7Config(t, dataDir, natsListen, "", ""), true)
	review7MustSend(t, s.base, "evt_1", "accepted")
	review7MustSend(t, s.base, "evt_1", "duplicate")

	for _, l := range strings.Split(s.stderr.String(), "\n") {
		// Saying clearly what is wrong: a directory is in the way.
		if strings.Contains(l, "snapshot not used") && !strings.Contains(l, "directory") {
			t.Errorf("the start's warning does not say that a directory sits where the snapshot goes:\n%s", l)
		}
	}
	failures := func() int { return strings.Count(s.stderr.String(), `"msg":"key index snapshot"`) }
	began, before := time.Now(), failures()
	end := began.Add(6 * time.Second) // a tick is 1 s: 4 tries in 4 s before the fix
	for failures()-before < 4 && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := failures() - before; n >= 4 {
		t.Errorf("a snapshot that cannot be written was tried again %d times in %s (each a full rewrite and fsync of the index, and a warning), want at most one per SnapshotEvery (2 m)\nlast lines:\n%s",
			n, time.Since(began).Round(100*time.Millisecond), tail(s.stderr.String(), 900))
	}
}

// TestReview7HealthzAnswersWhileTheKeyIndexReadsBack: the contract says
// "GET /healthz 200 while the process runs" and "/readyz ... 503
// otherwise". serve opens its listeners only once the key index is open,
// and without a usable snapshot the index reads back every event of the
// horizon first (README: about 210 s at 10 M events). Meanwhile nothing
// listens: /healthz is refused, so a liveness probe kills the process
// before the read-back ends, and the next start reads back again from
// scratch (the snapshot is only written once the read-back is done).
func TestReview7HealthzAnswersWhileTheKeyIndexReadsBack(t *testing.T) {
	dataDir, natsListen, httpListen := t.TempDir(), freeAddr(t), freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, httpListen, "")
	// A WEBHOOKS kept by a key index, with events and no snapshot (lost,
	// or the first start after a horizon was lengthened).
	const events = 60000
	review7Store(t, cfgPath, events).Close()

	s := review7Start(t, cfgPath, false)
	base := "http://" + httpListen
	get := func(path string) (int, error) {
		// Generous: under -race beside other test packages an answer can
		// take a while; refused (nothing listening) fails at once anyway.
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(base + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	reading := func() bool { return strings.Contains(s.stderr.String(), "no key index snapshot: reading") }
	ready := func() bool { return strings.Contains(s.stderr.String(), `"msg":"key index ready"`) }
	listening := func() bool { return strings.Contains(s.stdout.String(), "listening on") }
	probed := false
	client := &http.Client{Timeout: 5 * time.Second}
	for end := time.Now().Add(25 * time.Second); time.Now().Before(end) && !ready(); time.Sleep(5 * time.Millisecond) {
		if !reading() {
			continue
		}
		health, herr := get("/healthz")
		readyz, rerr := get("/readyz")
		code, _, perr := review7Send(client, base, "early")
		listened := listening()
		if ready() {
			break // the probes may have raced the end of the read-back
		}
		probed = true
		if herr != nil || health != 200 {
			t.Fatalf("GET /healthz while the key index reads %d events back (the process runs): %d, %v; want 200 (a liveness probe would restart it, and the read-back start over)", events, health, herr)
		}
		if rerr != nil || readyz != 503 {
			t.Fatalf("GET /readyz while the key index reads back: %d, %v; want 503", readyz, rerr)
		}
		if perr != nil || code != 503 {
			t.Fatalf("a webhook while the key index reads back: %d, %v; want 503 (the sender retries; nothing stored)", code, perr)
		}
		if listened {
			t.Fatal(`the "listening" line was printed before the key index was open: it means ready`)
		}
		break
	}
	if !probed {
		t.Skip("the read-back ended before the probes could run (a fast machine); nothing shown")
	}
	for end := time.Now().Add(60 * time.Second); !listening(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not listening 60 s after the read-back began\n%s", tail(s.stderr.String(), 1500))
		}
	}
	review7MustSend(t, base, "bulk-7", "duplicate")
	review7MustSend(t, base, "early", "accepted") // its 503 stored nothing
	if code, err := get("/readyz"); err != nil || code != 200 {
		t.Fatalf("GET /readyz once open: %d, %v; want 200", code, err)
	}
}

// TestReview7ServeLogsConfigWarnings: `config check` warns about a
// dedup.window under 10 s on the embedded server (and about unsigned id or
// account headers), but serve, which loads the same config, says nothing
// about it: loadConfig keeps only the errors (Validate). An operator who
// never runs `config check` gets 503s under a slow disk with no hint at
// start.
func TestReview7ServeLogsConfigWarnings(t *testing.T) {
	cfgPath := review7Config(t, t.TempDir(), freeAddr(t), "", "dedup: { horizon: 1h, window: 4s }\n")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"config", "check", cfgPath}, func(string) string { return "" }, nil, &out, io.Discard); err != nil {
		t.Fatalf("config check: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "dedup.window") {
		t.Fatalf("setup: config check does not warn:\n%s", out.String())
	}
	s := review7Start(t, cfgPath, true)
	if !strings.Contains(s.stderr.String(), "dedup.window") {
		t.Errorf("serve started with a config that `config check` warns about (%s) and logged nothing about it:\n%s",
			strings.TrimSpace(out.String()), tail(s.stderr.String(), 1200))
	}
}

// TestReview7StopUnderLoadKeepsEveryAcceptedKey: a stop (SIGTERM: run's
// context ends) while senders are busy. Every event answered 200 accepted
// is in WEBHOOKS once, and after the restart (from the snapshot the stop
// wrote, plus what is read back) every one of them is a duplicate, stored
// once; events that got no 200 may be stored or not, never twice.
func TestReview7StopUnderLoadKeepsEveryAcceptedKey(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, "", "dedup: { horizon: 1h, window: 16s }\n")
	s := review7Start(t, cfgPath, true)

	var mu sync.Mutex
	accepted := map[string]bool{}
	sent := map[string]bool{}
	stopSending := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopSending:
					return
				default:
				}
				id := fmt.Sprintf("evt_%d_%d", w, i)
				mu.Lock()
				sent[id] = true
				mu.Unlock()
				code, st, err := review7Send(client, s.base, id)
				if err == nil && code == 200 && st == "accepted" {
					mu.Lock()
					accepted[id] = true
					mu.Unlock()
				}
				if err != nil || code != 200 {
					return // the gateway is stopping
				}
			}
		})
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		if n >= 1500 || time.Now().After(end) {
			break
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve after the stop: %v", err)
	}
	close(stopSending)
	wg.Wait()
	if !strings.Contains(s.stderr.String(), "hookgate stopped") {
		t.Fatalf("no clean stop:\n%s", tail(s.stderr.String(), 1000))
	}

	s = review7Start(t, cfgPath, true)
	stored := review7Stored(t, natsListen)
	for id := range accepted {
		key := "p:default:evt:" + id
		if stored[key] != 1 {
			t.Errorf("%s answered accepted, stored %d times", key, stored[key])
		}
	}
	for k, n := range stored {
		if n != 1 {
			t.Errorf("%s stored %d times", k, n)
		}
	}
	var lost []string
	for id := range accepted {
		code, st, err := review7Send(client, s.base, id)
		if err != nil || code != 200 || st != "duplicate" {
			lost = append(lost, fmt.Sprintf("%s: %d %q %v", id, code, st, err))
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d accepted events not duplicates after the restart: %v", len(lost), len(accepted), lost[:min(5, len(lost))])
	}
	t.Logf("sent %d, accepted %d before the stop; WEBHOOKS %d", len(sent), len(accepted), len(stored))
}

// TestReview7StatusOnlyReadsAndShowsTheSnapshot: status through
// nats.embedded.listen (serve running) and from data_dir (nothing
// running): the dedup line says kept, the snapshot line names data_dir's
// file, and WEBHOOKS's config (window, metadata) is the same after.
func TestReview7StatusOnlyReadsAndShowsTheSnapshot(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, "", "dedup: { horizon: 1h, window: 16s }\n")
	webhooksConfig := func() string {
		cf := review7Webhooks(t, natsListen).CachedInfo().Config
		return fmt.Sprintf("window %s metadata %v", cf.Duplicates, cf.Metadata)
	}
	status := func(via string) {
		t.Helper()
		var out bytes.Buffer
		if err := run(t.Context(), []string{"status", "--config", cfgPath}, func(string) string { return "" }, nil, &out, io.Discard); err != nil {
			t.Fatalf("status (%s): %v", via, err)
		}
		o := out.String()
		for _, want := range []string{"read " + via, "kept by the embedded gateway's key index (JetStream's own window 16s)", "key index snapshot  " + filepath.Join(dataDir, keyIndexFile)} {
			if !strings.Contains(o, want) {
				t.Errorf("status (%s) lacks %q:\n%s", via, want, o)
			}
		}
	}
	s := review7Start(t, cfgPath, true)
	review7MustSend(t, s.base, "evt_s1", "accepted")
	before := webhooksConfig()
	status("through nats.embedded.listen")
	if after := webhooksConfig(); after != before {
		t.Errorf("status through listen changed WEBHOOKS: %s -> %s", before, after)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	status("from data_dir")
	s = review7Start(t, cfgPath, true)
	if after := webhooksConfig(); after != before {
		t.Errorf("WEBHOOKS after status from data_dir and a restart: %s, want %s", after, before)
	}
	review7MustSend(t, s.base, "evt_s1", "duplicate")
}

// TestReview7HorizonAndWindowChangesBetweenRestarts: a longer horizon
// than the snapshot was written for (read back in full), a longer window
// than before, a shorter horizon (keys past it are new again).
func TestReview7HorizonAndWindowChangesBetweenRestarts(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	start := func(dedup string) *review7Serve {
		return review7Start(t, review7Config(t, dataDir, natsListen, "", dedup), true)
	}
	s := start("dedup: { horizon: 1h, window: 1s }\n")
	review7MustSend(t, s.base, "evt_h1", "accepted")
	first := time.Now()
	_ = s.stop(t)

	// Longer horizon than the snapshot's: read back, still a duplicate.
	s = start("dedup: { horizon: 2h, window: 1s }\n")
	if !strings.Contains(s.stderr.String(), "snapshot not used") {
		t.Errorf("a longer horizon: snapshot used?\n%s", tail(s.stderr.String(), 800))
	}
	review7MustSend(t, s.base, "evt_h1", "duplicate")
	_ = s.stop(t)

	// A longer window than before (short: the server rebuilds its id map
	// for the window in force at its next start, which would still hold
	// evt_h1 below, its horizon shortened under that window).
	s = start("dedup: { horizon: 2h, window: 2s }\n")
	review7MustSend(t, s.base, "evt_h1", "duplicate")
	review7MustSend(t, s.base, "evt_h2", "accepted")
	_ = s.stop(t)

	// A shorter horizon: evt_h1, stored more than it ago, is new again;
	// evt_h2 too once it is past it.
	for time.Since(first) < 4*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	s = start("dedup: { horizon: 3s, window: 1s }\nretention: { webhooks: { max_age: 1h } }\n")
	review7MustSend(t, s.base, "evt_h1", "accepted")
	review7MustSend(t, s.base, "evt_h1", "duplicate")
	stored := review7Stored(t, natsListen)
	if stored["p:default:evt:evt_h1"] != 2 || stored["p:default:evt:evt_h2"] != 1 {
		t.Errorf("stored: %v", stored)
	}
}
