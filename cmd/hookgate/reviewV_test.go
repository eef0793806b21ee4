package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/hookgate/hookgate/jetstream"
)

// reviewVDecisions reads a replay's table (SEQ KEY DECISION REASON) into
// key -> decision.
func reviewVDecisions(out string) map[string]string {
	d := map[string]string{}
	re := regexp.MustCompile(`^\d+\s+(\S+)\s+(\S+)`)
	for _, line := range strings.Split(out, "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			d[m[1]] = m[2]
		}
	}
	return d
}

// TestReviewVReplayDryRunPredictsTheRealRun: `replay --dry-run` is how an
// operator checks what a replay will do before doing it ("dry run,
// nothing changed"). It judges each event alone against the watermark as
// it is now, not as the events before it in the same run will have moved
// it. Two stored events of one subject, the newer one first (senders
// deliver out of order): the dry run says "2 apply", the real replay then
// applies the first and finds the second stale. The dry run's line for
// an event must be what the real run decides for it.
func TestReviewVReplayDryRunPredictsTheRealRun(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	// Gateway only: the events are stored, and nothing applies them until
	// the replay.
	cfg := review7Config(t, dataDir, natsAddr, "", "")
	s := review7Start(t, cfg, true)
	for _, body := range []string{
		`{"id":"new","grant_id":"G-1","at":"2026-11-30T11:00:00Z"}`,
		`{"id":"old","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`,
	} {
		if code := review6Post(t, s.base, body); code != 200 {
			t.Fatalf("post %s: %d", body, code)
		}
	}

	dry := review9Run(t, "", "replay", "--dry-run", "--config", cfg)
	if dry.code != 0 || !strings.Contains(dry.stdout, "dry run, nothing changed: 2 events") {
		t.Fatalf("replay --dry-run: exit %d\n%s%s", dry.code, dry.stdout, dry.stderr)
	}
	done := review9Run(t, "", "replay", "--config", cfg)
	if done.code != 0 || !strings.Contains(done.stdout, "replayed 2 events") {
		t.Fatalf("replay: exit %d\n%s%s", done.code, done.stdout, done.stderr)
	}
	predicted, decided := reviewVDecisions(dry.stdout), reviewVDecisions(done.stdout)
	for _, key := range []string{"p:default:evt:new", "p:default:evt:old"} {
		want := decided[key]
		if want == "applied" {
			want = "apply"
		}
		if predicted[key] != want {
			t.Errorf("%s: the dry run said %q, the replay right after it decided %q\ndry run:\n%s\nreplay:\n%s",
				key, predicted[key], decided[key], dry.stdout, done.stdout)
		}
	}
}

// TestReviewVDLQProviderFilterNamesAnUnknownProvider: `dlq list --provider
// P` and `dlq replay --all --provider P` with a P that is neither in the
// config nor has any letter (a typo: "grant" for "grants") answer
// "0 letters" / "re-fed 0 letters" and exit 0: an all-clear at 3 a.m.
// while letters wait. `replay --provider` refuses the same typo ("--provider
// %q is not in the config", exit 1); so must dlq (a provider removed from
// the config but with letters left is still a valid filter).
func TestReviewVDLQProviderFilterNamesAnUnknownProvider(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	live := reviewAConfig(t, dataDir, natsAddr, "", review6Provider)
	s := review7Start(t, live, true)
	// No occurred_at under watermark ordering: dead-lettered at once.
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	reviewAWaitFor(t, "1 letters", 15*time.Second, "dlq", "list", "--config", live)

	for _, args := range [][]string{
		{"dlq", "list", "--provider", "pp", "--config", live},
		{"dlq", "replay", "--all", "--dry-run", "--provider", "pp", "--config", live},
	} {
		r := review9Run(t, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "--provider") || !strings.Contains(r.stderr, "pp") {
			t.Errorf("%v (provider pp in neither the config nor DLQ; p has a letter): exit %d, want 1 and a line naming --provider pp\nstdout:\n%sstderr:\n%s",
				args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestReviewVReplayHorizonIsTheSystemsNotTheCLIConfigs: replay skips
// events stored longer ago than the horizon ("beyond-horizon", unless
// --force) because their applied keys have expired and "hookgate can no
// longer tell whether they were applied". It takes that horizon from the
// config it is given, not from the system it replays into: run with a
// config whose dedup.horizon is longer than the one the running serve
// keeps APPLIED under (the file already edited for the next rollout, a
// copy from another instance), an event of an `ordering: none` provider
// whose key APPLIED has forgotten is not beyond-horizon, looks new, and
// is applied a second time without --force: its forward runs again.
// APPLIED's TTL (which `status` prints) says how long keys are kept. (The
// provider forwards only: one that also publishes is found in GRANTS
// beyond the horizon too, already-applied, since review AH.)
func TestReviewVReplayHorizonIsTheSystemsNotTheCLIConfigs(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	providers := fmt.Sprintf(`providers:
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    ordering: none
    effects: { forward: { url: %q, timeout: 5s }, publish: "" }
`, review6Secret, target.URL)
	live := reviewAConfig(t, dataDir, natsAddr, "dedup: { horizon: 3s, window: 1s }\n", providers)
	other := reviewAConfig(t, dataDir, natsAddr, "dedup: { horizon: 1h, window: 1s }\n", providers)
	s := review7Start(t, live, true)
	if code := review9Post(t, s.base, "q", `{"id":"u1"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	reviewAWaitFor(t, "already-applied", 15*time.Second, "replay", "--dry-run", "--config", live)
	if n := hits.Load(); n != 1 {
		t.Fatalf("setup: forwarded %d times, want 1", n)
	}
	// Once APPLIED (TTL 3s) has forgotten the key, the live config's
	// replay says beyond-horizon (and --force says it would apply).
	forgotten := regexp.MustCompile(`q:default:evt:u1\s+apply\s`)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r := review9Run(t, "", "replay", "--dry-run", "--force", "--config", live); forgotten.MatchString(r.stdout) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("setup: APPLIED did not forget the key within 30 s")
		}
	}
	if r := review9Run(t, "", "replay", "--dry-run", "--config", live); !strings.Contains(r.stdout, "beyond-horizon") {
		t.Fatalf("setup: with the live config the event is not beyond-horizon:\n%s%s", r.stdout, r.stderr)
	}

	r := review9Run(t, "", "replay", "--config", other)
	if d := reviewVDecisions(r.stdout)["q:default:evt:u1"]; d == "applied" || hits.Load() != 1 {
		t.Errorf("replay without --force, with a config whose dedup.horizon (1h) is longer than APPLIED's TTL (3s): decided %q, forwarded %d times in all (want beyond-horizon, once)\n%s%s",
			d, hits.Load(), r.stdout, r.stderr)
	}
}

// TestReviewVDLQFlagsBeforeTheSubcommand: `hookgate dlq --config FILE list`
// (the config first, as an operator types it from shell history) exits 2
// saying `dlq --config: "FILE" is not a DLQ sequence number`: it took
// --config for the subcommand and the file for a sequence number. The
// usage line must name what to fix (the subcommand list|show|replay comes
// first), or the command work as written.
func TestReviewVDLQFlagsBeforeTheSubcommand(t *testing.T) {
	cfg := review9Config(t, t.TempDir(), "")
	review9Open(t, cfg).Close()
	r := review9Run(t, "", "dlq", "--config", cfg, "list")
	switch {
	case r.code == 0 && strings.Contains(r.stdout, "0 letters"):
	case r.code == 2 && !strings.Contains(r.stderr, "sequence number") && strings.Contains(r.stderr, "list|show"):
	default:
		t.Errorf("dlq --config FILE list: exit %d, want it listed, or exit 2 naming the subcommand (list|show|replay) as what is missing\nstdout:\n%sstderr:\n%s",
			r.code, r.stdout, r.stderr)
	}
}

// TestReviewVReplayedEventIsNotAppliedAgainFromItsLetter: an event whose
// forward was refused is dead-lettered. Once the receiver is fixed the
// operator runs `hookgate replay` over the time range (not `dlq replay`):
// it applies the event and forwards it, but leaves its letter in DLQ.
// The DLQ depth alert stays on, and the next `dlq replay --all`
// re-feeds the letter: within the horizon it is found already applied
// and removed, but once the applied key has expired (dedup.horizon; an
// `ordering: none` provider keeps nothing else) the letter's event looks
// new and is applied, and forwarded, a second time, with no --force
// anywhere. The contract: replay "never applies an event twice".
func TestReviewVReplayedEventIsNotAppliedAgainFromItsLetter(t *testing.T) {
	var refuse atomic.Bool
	var delivered atomic.Int32
	refuse.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			w.WriteHeader(http.StatusBadRequest) // dead-lettered at once
			return
		}
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	live := reviewAConfig(t, dataDir, natsAddr, "dedup: { horizon: 6s, window: 1s }\n", fmt.Sprintf(`providers:
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    ordering: none
    effects: { forward: { url: %q, timeout: 5s }, publish: "" }
`, review6Secret, target.URL))
	s := review7Start(t, live, true)
	if code := review9Post(t, s.base, "q", `{"id":"u1"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	reviewAWaitFor(t, "1 letters", 15*time.Second, "dlq", "list", "--config", live)

	refuse.Store(false)
	r := review9Run(t, "", "replay", "--config", live)
	if d := reviewVDecisions(r.stdout)["q:default:evt:u1"]; d != "applied" || delivered.Load() != 1 {
		t.Fatalf("setup: replay after the receiver was fixed: decided %q, delivered %d (want applied, 1; a slow machine may have taken past the 6 s horizon)\n%s%s",
			d, delivered.Load(), r.stdout, r.stderr)
	}
	forgotten := regexp.MustCompile(`q:default:evt:u1\s+apply\s`)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r := review9Run(t, "", "replay", "--dry-run", "--force", "--config", live); forgotten.MatchString(r.stdout) {
			break
		}
		if time.Now().After(end) {
			t.Fatal("setup: APPLIED did not forget the key within 30 s")
		}
	}
	l := review9Run(t, "", "dlq", "list", "--config", live)
	d := review9Run(t, "", "dlq", "replay", "--all", "--config", live)
	if n := delivered.Load(); n != 1 {
		t.Errorf("the event was delivered %d times: once by replay, then again by dlq replay --all from the letter replay left in DLQ\ndlq list after the replay:\n%s\ndlq replay --all:\n%s%s",
			n, l.stdout, d.stdout, d.stderr)
	}
}

// TestReviewVInterruptedDLQReplayStops: Ctrl-C (run's ctx cancelled, as
// main's signal.NotifyContext does) during `dlq replay --all`'s first
// re-feed. Review 9 made `replay` stop there and say how far it got;
// `dlq replay` goes on through every letter it listed, "re-feeding" each
// with a dead context, prints each letter it never tried as an error
// ("context canceled"), and ends with a summary as if it had run: with a
// few hundred letters, a screen of errors and no line saying it stopped.
// The operator expects it to stop at once, name the letters not re-fed
// (they are untouched) and exit 1.
func TestReviewVInterruptedDLQReplayStops(t *testing.T) {
	var hold atomic.Bool
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hold.Load() {
			w.WriteHeader(http.StatusBadRequest) // dead-lettered at once
			return
		}
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	defer close(release)
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	live := reviewAConfig(t, dataDir, natsAddr, "", fmt.Sprintf(`providers:
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
    effects: { forward: { url: %q, timeout: 30s } }
`, review6Secret, target.URL))
	s := review7Start(t, live, true)
	for i := range 3 {
		if code := review9Post(t, s.base, "q", fmt.Sprintf(`{"id":"e%d","grant_id":"G-%d","at":"2026-11-30T10:00:00Z"}`, i, i)); code != 200 {
			t.Fatalf("post %d: %d", i, code)
		}
	}
	reviewAWaitFor(t, "3 letters", 15*time.Second, "dlq", "list", "--config", live)
	// Letters are re-fed in the order their events were stored (stop
	// 38), not DLQ's: the first tried is e0's, whichever letter it is.
	const first = "q:default:evt:e0"
	firstSeq := reviewVLetterSeq(t, live, first)

	hold.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dlq", "replay", "--all", "--config", live}, func(string) string { return "" }, nil, &out, &errb)
	}()
	select {
	case <-arrived: // the first letter's forward is in flight: Ctrl-C
	case <-time.After(20 * time.Second):
		t.Fatal("dlq replay did not forward")
	}
	cancel()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("dlq replay did not stop within 30 s of the interrupt")
	}
	code := exitCode(runErr, &errb)
	if code != 1 || !strings.Contains(errb.String(), "stopped") {
		t.Errorf("interrupted dlq replay: exit %d, want 1 with a line saying it stopped:\nstdout:\n%sstderr:\n%s", code, out.String(), errb.String())
	}
	// The interrupt came during the first letter's forward.
	row := regexp.MustCompile(`^(\d+)\s`)
	for _, line := range strings.Split(out.String(), "\n") {
		if m := row.FindStringSubmatch(line); m != nil && m[1] != firstSeq {
			t.Errorf("interrupted during the first letter (%s, %s), dlq replay reports one it never tried: %q\nstdout:\n%s", firstSeq, first, line, out.String())
		}
	}
	// Reported interrupted, not failed: its receiver may have taken it.
	if !regexp.MustCompile(`(?m)^` + firstSeq + `\s+\S+\s+interrupted\s+stopped by the interrupt before it was decided: a forward under way may have reached its receiver.*\(letter kept\)$`).MatchString(out.String()) {
		t.Errorf("interrupted dlq replay: want letter %s reported interrupted, letter kept:\n%s", firstSeq, out.String())
	}
	if r := review9Run(t, "", "dlq", "list", "--config", live); !strings.Contains(r.stdout, "3 letters") {
		t.Errorf("after the interrupted dlq replay, DLQ should still hold the 3 letters:\n%s", r.stdout)
	}
}

// reviewVLetterSeq returns the DLQ sequence of key's letter.
func reviewVLetterSeq(t *testing.T, cfg, key string) string {
	t.Helper()
	r := review9Run(t, "", "dlq", "list", "--config", cfg)
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == key {
			return f[0]
		}
	}
	t.Fatalf("no letter of %s in dlq list: %+v", key, r)
	return ""
}

// TestReviewVStatusJSONListsInstancesWhenJetStreamFails: the README says
// status asks the running serves first "so when JetStream does not answer
// it still prints the instances before its error": the one time the
// listing explains the most (a serve not ready, and why). `status` does;
// `status --json`, what monitoring runs, prints nothing on stdout then,
// only the error on stderr: the script learns neither that a serve runs
// nor what its /readyz says.
func TestReviewVStatusJSONListsInstancesWhenJetStreamFails(t *testing.T) {
	// A NATS whose JetStream does not answer (not enabled), and a serve's
	// instance answer on it, as reviewIAnswer makes one: its readiness
	// check fails the way sys.Ready does there.
	url := review10aNoJetStream(t)
	conn, err := jetstream.Connect(jetstream.ConnectOptions{Name: "serve", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	scfg := &config.Config{}
	scfg.Roles.Gateway = true
	rep := newInstanceReporter(scfg, nil, time.Now(), func(context.Context) error {
		return fmt.Errorf("jetstream %s: %w", jetstream.StreamWebhooks, errors.New("nats: jetstream not enabled"))
	}, nil)
	stop, err := jetstream.AnswerInstances(conn, rep.report)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { rep.run(ctx); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, "http: { listen: \"127.0.0.1:0\" }\nnats: { url: %q }\n%s", url, review6Provider), 0o600); err != nil {
		t.Fatal(err)
	}
	me := fmt.Sprintf("/%d", os.Getpid())
	var text review9Result
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if text = review9Run(t, "", "status", "--config", cfgPath); strings.Contains(text.stdout, me) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("setup: status never listed the serve: exit %d\n%s%s", text.code, text.stdout, text.stderr)
		}
	}
	if text.code != 1 {
		t.Fatalf("setup: status with JetStream not answering: exit %d, want 1\n%s%s", text.code, text.stdout, text.stderr)
	}
	r := review9Run(t, "", "status", "--json", "--config", cfgPath)
	var doc struct {
		Instances []instanceDoc `json:"instances"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Instances) != 1 || !strings.Contains(doc.Instances[0].Instance, me) {
		t.Errorf("status --json with JetStream not answering: exit %d, stdout not a document listing the serve (%v)\nstatus (text) printed:\n%s%s\nstatus --json printed:\nstdout:\n%sstderr:\n%s",
			r.code, err, text.stdout, text.stderr, r.stdout, r.stderr)
	}
}
