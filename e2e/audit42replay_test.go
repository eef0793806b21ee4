package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Each test below was written, failing, against the code before its fix, and
// its comment tells the defect as the audit found it: all are fixed since
// (stop 42), and the tests hold the fixes.

// audit42ReplayReceiver answers each key's requests from a script: the n-th
// request of a key gets script[key][n] (the last entry repeats); an entry
// below 0 means "sleep that many milliseconds, then 204".
type audit42ReplayReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script map[string][]int
	seen   map[string]int
}

func newAudit42ReplayReceiver(t testing.TB, script map[string][]int) *audit42ReplayReceiver {
	rc := &audit42ReplayReceiver{script: script, seen: map[string]int{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		rc.mu.Lock()
		n := rc.seen[key]
		rc.seen[key]++
		plan := rc.script[key]
		rc.mu.Unlock()
		code := http.StatusNoContent
		if len(plan) > 0 {
			code = plan[min(n, len(plan)-1)]
		}
		if code < 0 {
			time.Sleep(time.Duration(-code) * time.Millisecond)
			code = http.StatusNoContent
		}
		if code != http.StatusNoContent {
			http.Error(w, "not now", code)
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *audit42ReplayReceiver) requests(key string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.seen[key]
}

// audit42ReplayEnv is operatorEnv with the backoff replaced and a 10 s forward
// timeout.
func audit42ReplayEnv(t testing.TB, forwardURL, backoff string) *env {
	t.Helper()
	e := operatorEnv(t, forwardURL)
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), "backoff: [100ms]", "backoff: ["+backoff+"]", 1)
	cfg = strings.Replace(cfg, "timeout: 2s", "timeout: 10s", 1)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// README (Replay): "An event that replay applies and that has a letter in
// DLQ ... has its letter removed (`its letter N removed from DLQ`, audited
// `dlq-removed`)". A replay running beside serve reads DLQ once, at its
// first event, and keeps that view: an event serve dead-letters after that
// moment, which the same replay then applies, keeps its letter. The letter
// is left in DLQ for an applied event (status lists it as a problem; once
// the key expires, `dlq replay --all` applies and forwards it again).
func TestAudit42ReplayRemovesLetterWrittenDuringTheRun(t *testing.T) {
	const keyX, keyE = "grants:default:evt:a42_x", "grants:default:evt:a42_e"
	rc := newAudit42ReplayReceiver(t, map[string][]int{
		keyX: {422, -6000},    // dead-lettered at once by serve; the replay's forward takes 6 s
		keyE: {503, 503, 204}, // serve's two attempts fail (a letter), the replay's succeeds
	})
	e := audit42ReplayEnv(t, rc.srv.URL+"/hooks", "3s")
	hg := start(t, e.cfgPath)
	url := hg.baseURL + "/webhooks/grants"

	bodyX := []byte(`{"grant_id":"G-X","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "a42_x", bodyX), bodyX), 200, "status", "accepted")
	waitFor(t, "X dead-lettered", 30*time.Second, func() bool {
		out, _, _ := cli(t, "dlq", "list", "--config", e.cfgPath)
		return strings.Contains(out, keyX)
	})
	bodyE := []byte(`{"grant_id":"G-E","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, url, signGrants(t, "a42_e", bodyE), bodyE), 200, "status", "accepted")
	waitFor(t, "serve's first try of E", 30*time.Second, func() bool { return rc.requests(keyE) >= 1 })

	// The replay starts while E waits out its backoff (3 s): it reads DLQ
	// at X, and reaches E after X's 6 s forward, once E has its letter.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "replay", "--from-seq", "1", "--config", e.cfgPath)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Logf("replay: %v", err)
	}
	if rc.requests(keyE) != 3 {
		t.Fatalf("setup: E had %d forward requests, want 3 (2 by serve, 1 by the replay)\n%s%s", rc.requests(keyE), out.String(), errb.String())
	}
	if !regexp.MustCompile(`a42_e +applied`).MatchString(out.String()) {
		t.Fatalf("setup: the replay did not apply E:\n%s%s", out.String(), errb.String())
	}
	list, _, _ := cli(t, "dlq", "list", "--config", e.cfgPath)
	if strings.Contains(list, keyE) {
		t.Fatalf("replay applied E (forwarded, published) but left its letter in DLQ; the replay said:\n%s\ndlq list:\n%s", out.String(), list)
	}
}

// A replay whose events are `failed` (a forward answered 503, here a
// dead-lettered event re-fed while its receiver is still down) exits 1
// with nothing on stderr: a script, or an operator reading only errors,
// sees a bare exit 1. Every other exit-1 outcome of replay says why on
// stderr (dead-lettered: "N events were dead-lettered, not applied: ...";
// not-in-config; interrupted), as the contract's "exit 1 ... with a
// one-line message naming what to fix" asks.
func TestAudit42ReplayFailedExitSaysWhy(t *testing.T) {
	const key = "grants:default:evt:a42_f"
	rc := newAudit42ReplayReceiver(t, map[string][]int{key: {503}})
	e := operatorEnv(t, rc.srv.URL+"/hooks")
	hg := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-F","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "a42_f", body), body), 200, "status", "accepted")
	waitFor(t, "the event dead-lettered", 30*time.Second, func() bool {
		out, _, _ := cli(t, "dlq", "list", "--config", e.cfgPath)
		return strings.Contains(out, key)
	})
	out, errOut, code := cli(t, "replay", "--config", e.cfgPath)
	if !regexp.MustCompile(`a42_f +failed`).MatchString(out) {
		t.Fatalf("setup: the replay did not report the event failed (exit %d):\n%s%s", code, out, errOut)
	}
	if code != 1 {
		t.Fatalf("replay with a failed event: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if strings.TrimSpace(errOut) == "" {
		t.Fatalf("replay exited 1 with an empty stderr; stdout:\n%s", out)
	}
}

// README: `dlq remove` leaves the event in WEBHOOKS ("`hookgate replay
// --subject ...` can still re-feed it"), and a replay that dead-letters an
// event without a letter writes one "as the consumer would", then exits 1
// pointing to 'hookgate dlq list'. Within dedup.window of the removed
// letter, the new letter carries the same Nats-Msg-Id (key|stored seq),
// JetStream drops it as a duplicate of the removed one, and the replay
// still reports (and audits) the event dead-lettered: DLQ is empty, the
// letter the operator is sent to does not exist.
func TestAudit42ReplayDeadLetterAfterRemoveIsWritten(t *testing.T) {
	const key = "grants:default:evt:a42_z"
	rc := newAudit42ReplayReceiver(t, nil)
	e := operatorEnv(t, rc.srv.URL+"/hooks")
	hg := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-Z","type":"t"}`) // no occurred_at: dead-lettered at once
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "a42_z", body), body), 200, "status", "accepted")
	waitFor(t, "the event dead-lettered", 30*time.Second, func() bool {
		out, _, _ := cli(t, "dlq", "list", "--config", e.cfgPath)
		return strings.Contains(out, key)
	})
	if out, errOut, code := cli(t, "dlq", "remove", "1", "--config", e.cfgPath); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("setup: dlq remove 1: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := cli(t, "replay", "--from-seq", "1", "--config", e.cfgPath)
	if !regexp.MustCompile(`a42_z +dead-lettered`).MatchString(out) {
		t.Fatalf("setup: the replay did not dead-letter the event (exit %d):\n%s%s", code, out, errOut)
	}
	list, _, _ := cli(t, "dlq", "list", "--config", e.cfgPath)
	if !strings.Contains(list, key) {
		t.Fatalf("replay said the event was dead-lettered and pointed to 'hookgate dlq list', but DLQ has no letter of it\nreplay (exit %d):\n%s%s\ndlq list:\n%s", code, out, errOut, list)
	}
}

// README (Audit): "Every operator decision lands in AUDIT with actor
// operator: `replayed`, ...". A replay writes a `replayed` record for each
// event it decides (already-applied ones included), but none for an event
// it decides beyond-horizon, one of the contract's four replay decisions:
// `trace` of that event shows no sign the operator's replay judged and
// skipped it.
func TestAudit42ReplayBeyondHorizonIsAudited(t *testing.T) {
	const key = "grants:default:evt:a42_h"
	rc := newAudit42ReplayReceiver(t, nil)
	e := operatorEnv(t, rc.srv.URL+"/hooks")
	hg := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-H","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "a42_h", body), body), 200, "status", "accepted")
	waitFor(t, "the event applied", 30*time.Second, func() bool { return rc.requests(key) == 1 })

	// The operator's copy of the config with a 1 s horizon: the event,
	// stored over a second ago, is beyond it.
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	short := e.cfgPath + ".short.yaml"
	if err := os.WriteFile(short, []byte(strings.Replace(string(b), "consumer:", "dedup: { horizon: 1s, window: 1s }\nconsumer:", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a dry run deciding the event beyond-horizon", 30*time.Second, func() bool {
		dry, _, _ := cli(t, "replay", "--dry-run", "--config", short)
		return regexp.MustCompile(`a42_h +beyond-horizon`).MatchString(dry)
	})
	out, errOut, code := cli(t, "replay", "--config", short)
	if !regexp.MustCompile(`a42_h +beyond-horizon`).MatchString(out) {
		t.Fatalf("setup: replay (exit %d) did not decide the event beyond-horizon:\n%s%s", code, out, errOut)
	}
	var tr string
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr, _, _ = cli(t, "trace", key, "--config", e.cfgPath)
		if regexp.MustCompile(`replayed +operator`).MatchString(tr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replay decided %s beyond-horizon but AUDIT has no replayed record of it within 10 s\nreplay:\n%s\ntrace:\n%s", key, out, tr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// An event serve is still retrying (a 503, waiting out its backoff) that
// an operator's replay dead-lettered (the receiver refused it with a 422)
// was then applied by serve's next try: DLQ kept a letter for an applied
// event (forwarded, in GRANTS), the replay's AUDIT said dead-lettered,
// `status` listed the letter as a problem, and `dlq replay` re-fed it
// (once its key had expired, under `ordering: none` without publish,
// applying it a second time). Now the replay writes no letter for an
// event serve's consumer holds: its line says failed, left to the live
// consumer, and serve's retries decide it (here: applied, no letter).
func TestAudit42ReplayDeadLetteredEventNotAppliedByServeAfterwards(t *testing.T) {
	const key = "grants:default:evt:a42_r"
	rc := newAudit42ReplayReceiver(t, map[string][]int{key: {503, 422, 204}})
	e := audit42ReplayEnv(t, rc.srv.URL+"/hooks", "4s")
	hg := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-R","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "a42_r", body), body), 200, "status", "accepted")
	waitFor(t, "serve's first try", 30*time.Second, func() bool { return rc.requests(key) >= 1 })

	// The replay's try is refused for good (422), but serve still holds
	// the event (delivered, waiting out its backoff): the replay writes no
	// letter, says so, and leaves the event to serve's retries.
	out, errOut, code := cli(t, "replay", "--from-seq", "1", "--config", e.cfgPath)
	if !regexp.MustCompile(`a42_r +failed +permanent failure: .*422.*not dead-lettered: left to the live consumer`).MatchString(out) || code != 1 {
		t.Fatalf("the replay's refused try of an event serve holds: want it failed, not dead-lettered, left to serve (exit 1); got exit %d, %d requests:\n%s%s", code, rc.requests(key), out, errOut)
	}
	// serve's second try comes after its 4 s backoff; give it until the
	// receiver has seen it, then until the consumer has nothing pending.
	waitFor(t, "serve's second try or its giving up", 30*time.Second, func() bool { return rc.requests(key) >= 3 })
	var list string
	waitFor(t, "serve done with the event", 30*time.Second, func() bool {
		st, _, _ := cli(t, "status", "--config", e.cfgPath)
		list, _, _ = cli(t, "dlq", "list", "--config", e.cfgPath)
		return regexp.MustCompile(`WEBHOOKS/hookgate-apply +0 +0 `).MatchString(st)
	})
	grants := streamMsgs(t, e, "GRANTS")
	if grants != 1 {
		t.Fatalf("GRANTS holds %d messages after serve's 204, want the event's 1", grants)
	}
	if strings.Contains(list, key) {
		t.Fatalf("the event is applied (forwarded 2xx by serve after the replay dead-lettered it; GRANTS holds it) and DLQ still holds its letter:\nreplay:\n%s\ndlq list:\n%s", out, list)
	}
}
