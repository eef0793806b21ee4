package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
)

// review9Config writes a config over dataDir (no nats listen: the CLI opens
// data_dir itself) with extra YAML appended, and returns its path.
func review9Config(t *testing.T, dataDir, extra string) string {
	t.Helper()
	yaml := fmt.Sprintf(`http: { listen: "127.0.0.1:0", max_body_bytes: 1024 }
nats: { embedded: { data_dir: %q } }
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["whsec_aG9va2dhdGUtZGV2LWdyYW50c2dvdi1zZWNyZXQ="] }
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
%s`, dataDir, extra)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// review9Open opens the data_dir of cfgPath as serve would (streams and
// buckets provisioned); the caller closes it before running the CLI.
func review9Open(t *testing.T, cfgPath string) *system {
	t.Helper()
	cfg, err := loadConfig(cfgPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	sys, err := openSystem(t.Context(), cfg, slog.New(slog.DiscardHandler), "review9-setup", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := jetstream.ProvisionKV(t.Context(), sys.conn.JS, jetstream.KVConfig{Replicas: 1, Horizon: cfg.Dedup.Horizon}); err != nil {
		sys.Close()
		t.Fatal(err)
	}
	return sys
}

type review9Result struct {
	code           int
	stdout, stderr string
}

func review9Run(t *testing.T, stdin string, args ...string) review9Result {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errb)
	code := exitCode(err, &errb)
	return review9Result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestReview9DryRunChangesNothing: `replay --dry-run` and `dlq replay
// --all --dry-run` promise "nothing changed". When no hookgate is running
// they open data_dir themselves, and openSystem(readWrite) provisions the
// streams with the CLI's config: a config edited for the next rollout (here
// a smaller retention.audit.max_bytes and max_age, a shorter horizon)
// is applied to the live streams by the dry run. AUDIT discards old
// records when over its limit, so the dry run deletes audit records.
func TestReview9DryRunChangesNothing(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "--dry-run"},
		{"dlq", "replay", "--all", "--dry-run"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dataDir := t.TempDir()
			live := review9Config(t, dataDir, "")
			sys := review9Open(t, live)
			const records = 1000
			for i := range records {
				b, _ := json.Marshal(event.AuditRecord{Time: time.Now().UTC(), Decision: "accepted", Provider: "grants", Account: "default",
					Key: fmt.Sprintf("grants:default:evt:%d-%s", i, strings.Repeat("x", 200)), Actor: "gateway"})
				if _, err := sys.conn.JS.PublishAsync("audit.accepted.grants", b); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-sys.conn.JS.PublishAsyncComplete():
			case <-time.After(20 * time.Second):
				t.Fatal("setup: audit records not acknowledged")
			}
			sys.Close()
			before := review9Streams(t, live)

			// The same data_dir, a config with smaller limits (valid:
			// config check passes it).
			edited := review9Config(t, dataDir, "dedup: { horizon: 48h }\nretention: { audit: { max_age: 24h, max_bytes: 64KB } }\n")
			if r := review9Run(t, "", "config", "check", edited); r.code != 0 {
				t.Fatalf("setup: edited config does not check: %+v", r)
			}
			r := review9Run(t, "", append(args, "--config", edited)...)
			if r.code != 0 || !strings.Contains(r.stdout, "dry run, nothing changed") {
				t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			after := review9Streams(t, live)
			for _, name := range []string{"AUDIT", "KV_APPLIED"} {
				if before[name] != after[name] {
					t.Errorf("%v said %q but changed %s:\n before %s\n after  %s", args, "dry run, nothing changed", name, before[name], after[name])
				}
			}
		})
	}
}

// review9Streams reads the limits and message count of AUDIT and the
// APPLIED bucket's stream through a fresh open of data_dir.
func review9Streams(t *testing.T, cfgPath string) map[string]string {
	t.Helper()
	cfg, err := loadConfig(cfgPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	sys, err := openSystem(t.Context(), cfg, slog.New(slog.DiscardHandler), "review9-look", readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	out := map[string]string{}
	for _, name := range []string{"AUDIT", "KV_APPLIED"} {
		s, err := sys.conn.JS.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		out[name] = fmt.Sprintf("messages %d, max_age %s, max_bytes %d", info.State.Msgs, info.Config.MaxAge, info.Config.MaxBytes)
	}
	return out
}

// TestReview9ReplayDoesNotDeadLetterTwice: an event the consumer
// dead-lettered at once (watermark ordering, no subject) already has its
// letter in DLQ. `hookgate replay` over the range re-feeds it through
// ProcessOnce, which dead-letters it again: once dedup.window (DLQ's
// duplicate window) has passed, DLQ holds a second letter for the same
// stored event, and every further replay adds one more. An operator who
// replays a window to recover sees the DLQ depth alert grow and `dlq replay
// --all` re-feeds the same event once per copy. The replay exits 0.
func TestReview9ReplayDoesNotDeadLetterTwice(t *testing.T) {
	natsAddr := freeAddr(t)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\ndedup: { horizon: 1h, window: 1s }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		t.TempDir(), natsAddr, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, true)
	// No grant_id: the subject is missing, dead-lettered at once.
	if code := review6Post(t, s.base, `{"id":"e1","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	letters := func() string {
		r := review9Run(t, "", "dlq", "list", "--config", path)
		if r.code != 0 {
			t.Fatalf("dlq list: %+v", r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		return lines[len(lines)-1]
	}
	for end := time.Now().Add(10 * time.Second); letters() != "1 letters"; {
		if time.Now().After(end) {
			t.Fatalf("the consumer did not dead-letter the event: %s", letters())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // past dedup.window, DLQ's duplicate window

	r := review9Run(t, "", "replay", "--config", path)
	t.Logf("replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if !strings.Contains(r.stdout, "already in DLQ as letter") {
		t.Errorf("replay of an event whose letter is in DLQ does not point to it:\n%s", r.stdout)
	}
	if got := letters(); got != "1 letters" {
		out := review9Run(t, "", "dlq", "list", "--config", path).stdout
		t.Errorf("after one replay DLQ holds %q for one stored event, want 1 letters:\n%s", got, out)
	}
}

// TestReview9ExtraArgumentsAreUsageErrors: replay, status and trace reject
// an argument they do not take (exit 2); sign and config check ignore it
// and exit 0. The likely one at 3 a.m.: the body file given as an
// argument instead of on stdin; sign then signs whatever stdin holds (here
// nothing: a script's empty stdin; on a terminal it waits for input) and
// prints headers that will never verify for the body the operator meant.
func TestReview9ExtraArgumentsAreUsageErrors(t *testing.T) {
	cfg := review9Config(t, t.TempDir(), "")
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"grant_id":"G-1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"sign", "--config", cfg, "--provider", "grants", "--id", "m1", body},
		{"config", "check", cfg, "other.yaml"},
		{"config", "check", cfg, "--json"},
	} {
		r := review9Run(t, "", args...)
		if r.code != 2 {
			t.Errorf("hookgate %s: exit %d, want 2 (usage: unexpected argument %q)\nstdout: %sstderr: %s",
				strings.Join(args, " "), r.code, args[len(args)-1], r.stdout, r.stderr)
		}
	}
}

// TestReview9ReadCommandsOnAMissingDataDir: with nothing listening, the
// operator commands open data_dir themselves. When data_dir does not exist
// (a config copied from another host, a data_dir relative to the wrong
// file), status, trace and dlq list create it (lock, token, a JetStream
// store; dlq list even provisions the four streams) and dlq list answers
// "0 letters" with exit 0: a false all-clear. The operator expects exit 1
// naming nats.embedded.data_dir, and nothing created by a read (status
// too: "every stream missing" would send them looking in the wrong place).
func TestReview9ReadCommandsOnAMissingDataDir(t *testing.T) {
	for _, c := range []struct {
		args     []string
		wantExit int
	}{
		{[]string{"dlq", "list"}, 1},
		{[]string{"status"}, 1},
		{[]string{"trace", "grants:default:evt:1"}, 1},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "no-such-dir")
			cfg := review9Config(t, dataDir, "")
			r := review9Run(t, "", append(c.args, "--config", cfg)...)
			_, statErr := os.Stat(dataDir)
			if r.code != c.wantExit || statErr == nil || !strings.Contains(r.stderr, "nats.embedded.data_dir") {
				t.Errorf("hookgate %s with a data_dir that does not exist: exit %d (want %d), data_dir created %v (want nothing created)\nstdout: %sstderr: %s",
					strings.Join(c.args, " "), r.code, c.wantExit, statErr == nil, r.stdout, r.stderr)
			}
		})
	}
}

// TestReview9InterruptedReplayStops: Ctrl-C (run's ctx cancelled, as
// main's signal.NotifyContext does) during a replay's first forward. The
// replay goes on through every event already fetched (up to 256 a batch),
// "re-feeding" each with a dead context, prints each as "failed" with a
// GRANTS read error, and ends "replayed 3 events: 3 failed": events it
// never tried are reported replayed-and-failed. The operator expects it to
// stop at once and say how far it got (1 tried, 2 not replayed).
func TestReview9InterruptedReplayStops(t *testing.T) {
	review9InterruptedReplay(t, nil, "--from-seq 1 ", []string{"grants:default:evt:m1", "grants:default:evt:m2"})
}

// With --subject, the advice goes on from the event the interrupt cut
// short, not from the first event the filter passed over (review AV: it
// said --from-seq 1, which rescans the stream from its start).
func TestReviewAVInterruptedSubjectReplayGoesOnFromItsEvent(t *testing.T) {
	review9InterruptedReplay(t, []string{"--subject", "G-1"}, "--from-seq 2 ", []string{"grants:default:evt:m2"})
}

// review9InterruptedReplay stores three events (m0-m2, subjects G-0 to
// G-2), runs replay with extra args, interrupts it during its first
// forward, and wants it to stop, advise wantFrom, and never report the
// keys notTried.
func review9InterruptedReplay(t *testing.T, extra []string, wantFrom string, notTried []string) {
	t.Helper()
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer close(release)

	dataDir := t.TempDir()
	cfgPath := review9Config(t, dataDir, fmt.Sprintf("    effects: { forward: { url: %q, timeout: 30s } }\nroles: { consumer: false }\n", srv.URL+"/hook"))
	// Three events stored by the gateway; the consumer role is off, so
	// none is applied yet.
	s := review7Start(t, cfgPath, true)
	sch, err := gateway.NewScheme("standard-webhooks", gateway.SchemeOptions{Tolerance: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		body := fmt.Sprintf(`{"grant_id":"G-%d","occurred_at":"2026-11-30T10:00:00Z"}`, i)
		h, err := sch.Sign([]byte(body), config.Secret("whsec_aG9va2dhdGUtZGV2LWdyYW50c2dvdi1zZWNyZXQ="), fmt.Sprintf("m%d", i), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, s.base+"/webhooks/grants", strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("post %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"replay", "--config", cfgPath}, extra...), func(string) string { return "" }, nil, &out, &errb)
	}()
	select {
	case <-arrived: // the first event's forward is in flight: Ctrl-C
	case <-time.After(20 * time.Second):
		t.Fatal("replay did not forward")
	}
	cancel()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("replay did not stop within 30 s of the interrupt")
	}
	code := exitCode(runErr, &errb)
	if code != 1 || !strings.Contains(errb.String(), "replay stopped") {
		t.Errorf("interrupted replay: exit %d, want 1 with a line saying it stopped:\n%s%s", code, out.String(), errb.String())
	}
	// It says where to go on from: m0, whose forward the interrupt cut
	// short (going on after it would skip it).
	if !strings.Contains(errb.String(), wantFrom) {
		t.Errorf("interrupted replay: want the advice to go on with %s:\n%s%s", wantFrom, out.String(), errb.String())
	}
	// The event whose forward was cut short is reported interrupted, not
	// failed: its receiver may have taken it (stop 40).
	if !regexp.MustCompile(`(?m)^\d+\s+grants:default:evt:m\d\s+interrupted\s+stopped by the interrupt before it was decided: a forward under way may have reached its receiver`).MatchString(out.String()) ||
		strings.Contains(out.String(), "failed") {
		t.Errorf("interrupted replay: want the cut-short event reported interrupted, not failed:\n%s", out.String())
	}
	for _, key := range notTried {
		if strings.Contains(out.String(), key) {
			t.Errorf("interrupted during the first event, the replay reports %s, which it never tried (exit %d):\n%s%s", key, code, out.String(), errb.String())
		}
	}
}

// review9Post posts body to provider (hmac-sha256 with review6Secret in
// X-Sig) and returns the status.
func review9Post(t *testing.T, base, provider, body string) int {
	t.Helper()
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sch.Sign([]byte(body), config.Secret(review6Secret), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+provider, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReview9ForwardTargetDownDoesNotStopOtherProviders: one provider's
// forward target is down (503), so each of its events waits out a retry's
// backoff, negatively acknowledged and still an unacknowledged delivery of
// the durable consumer. With serve's window (max(16 x workers, 128)) as
// the consumer's whole limit, 128 such events stopped every other provider
// until their backoff ran out (a minute here, 10 minutes by default, ~33
// minutes until dead-lettered). Another provider's event must still apply.
func TestReview9ForwardTargetDownDoesNotStopOtherProviders(t *testing.T) {
	var downHits, okHits atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		okHits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ok.Close)
	provider := func(name, url string) string {
		return fmt.Sprintf(`  %s:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
    effects: { forward: { url: %q, timeout: 5s } }
`, name, review6Secret, url)
	}
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q } }\n"+
		"consumer: { workers: 1, max_deliver: 8, backoff: [1m] }\nproviders:\n%s%s",
		t.TempDir(), provider("crm", down.URL), provider("grants", ok.URL))
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, true)
	const window = 128 // workers 1: max(16 x 1, 128)
	for i := range window + 8 {
		if code := review9Post(t, s.base, "crm", fmt.Sprintf(`{"id":"c%d","grant_id":"C-%d","at":"2026-11-30T10:00:00Z"}`, i, i)); code != 200 {
			t.Fatalf("post crm %d: %d", i, code)
		}
	}
	for end := time.Now().Add(30 * time.Second); downHits.Load() < window+8; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("only %d of %d crm events tried their forward in 30 s", downHits.Load(), window+8)
		}
	}
	if code := review9Post(t, s.base, "grants", `{"id":"g1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post grants: %d", code)
	}
	for end := time.Now().Add(15 * time.Second); okHits.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the grants provider's event was not applied within 15 s while %d crm events wait out their backoff (forward target down)", downHits.Load())
		}
	}
}
