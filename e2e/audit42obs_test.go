package e2e

// Audit 42, observability: what an operator sees (/metrics, the log,
// status --json, trace KEY, AUDIT) against what happened.
//
// Each test below was written, failing, against the code before its fix, and
// its comment tells the defect as the audit found it: all are fixed since
// (stop 42), and the tests hold the fixes.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/hookgate/hookgate/event"
)

const audit42ObsPlainSecret = "plain-obs-secret"

// audit42ObsPort is a free loopback port in 26000-26999 (the range this
// audit may use).
func audit42ObsPort(t testing.TB) int {
	t.Helper()
	for range 200 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 26000+rand.IntN(1000)))
		if err == nil {
			p := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port in 26000-26999")
	return 0
}

// audit42ObsEnv writes a config with an embedded server listening on
// loopback; consumerBlock and providers are YAML inserted as is (providers
// under `providers:`).
func audit42ObsEnv(t testing.TB, consumerBlock, providers string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, cfgPath: filepath.Join(dir, "hookgate.yaml")}
	port := audit42ObsPort(t)
	e.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`http:
  listen: "127.0.0.1:%d"
  max_body_bytes: 4096
nats:
  embedded:
    data_dir: %q
    listen: "127.0.0.1:%d"
    token: %q
consumer:
%s
providers:
%s
`, audit42ObsPort(t), filepath.Join(dir, "data"), port, natsToken, consumerBlock, providers)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// audit42ObsSignPlain signs body for an hmac-sha256 provider with header X-Sig.
func audit42ObsSignPlain(body []byte) http.Header {
	m := hmac.New(sha256.New, []byte(audit42ObsPlainSecret))
	m.Write(body)
	h := http.Header{}
	h.Set("X-Sig", "sha256="+hex.EncodeToString(m.Sum(nil)))
	return h
}

// audit42ObsAudit returns every AUDIT record.
func audit42ObsAudit(t testing.TB, j js.JetStream) []event.AuditRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "AUDIT")
	if err != nil {
		t.Fatalf("stream AUDIT: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.AuditRecord
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		recs, err := event.AuditRecords(m.Data)
		if err != nil {
			t.Fatalf("AUDIT seq %d: %v", seq, err)
		}
		out = append(out, recs...)
	}
	return out
}

const audit42ObsPlainProvider = `  plain:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["` + audit42ObsPlainSecret + `"] }
    event_id: ["json:/id"]
    fallback: reject
`

// A webhook over its provider's rate_limit is refused once its key is
// derived (README: "checked once the key is derived"), and its 429 is
// audited as a `rejected` record. The other rejections found after the key
// (431 headers too large, 400 value too long, 400 NATS header) name the key
// and account in their record, so `trace KEY` shows them; the 429's record
// names neither, so `trace KEY` of a rate-limited event says no event with
// that key is in AUDIT, although AUDIT holds its 429.
func TestAudit42ObsRateLimitedRecordNamesItsKey(t *testing.T) {
	e := audit42ObsEnv(t, "  workers: 2", audit42ObsPlainProvider+"    rate_limit: { per_second: 1, burst: 1 }\n")
	in := start(t, e.cfgPath)
	var limited string
	for i := range 20 {
		body := []byte(fmt.Sprintf(`{"id":"rl-%d"}`, i))
		r := post(t, in.baseURL+"/webhooks/plain", audit42ObsSignPlain(body), body)
		if r.status == http.StatusTooManyRequests {
			limited = fmt.Sprintf("plain:default:evt:rl-%d", i)
			break
		}
	}
	if limited == "" {
		t.Fatal("no 429 in 20 requests at rate_limit 1/s")
	}
	j := natsClient(t, e.natsURL, natsToken)
	var rec *event.AuditRecord
	waitFor(t, "the 429's AUDIT record", 10*time.Second, func() bool {
		for _, r := range audit42ObsAudit(t, j) {
			if r.Decision == "rejected" && r.Status == http.StatusTooManyRequests {
				rec = &r
				return true
			}
		}
		return false
	})
	tr := runHG(t, "trace", limited, "--config", e.cfgPath)
	if rec.Key != limited || rec.Account != "default" || tr.code != 0 {
		t.Fatalf("the 429 of %s is audited as key %q account %q; trace %s: exit %d: %s%s",
			limited, rec.Key, rec.Account, limited, tr.code, strings.TrimSpace(tr.stdout), strings.TrimSpace(tr.stderr))
	}
}

// audit42ObsReceiver is a forward receiver answering every POST with code.
func audit42ObsReceiver(t testing.TB, code int) string {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", audit42ObsPort(t)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/hook"
}

// audit42ObsForwarding is the providers block of a sequenced grants
// provider forwarding to url.
func audit42ObsForwarding(url string) string {
	return `  grants:
    signature: { scheme: standard-webhooks, secrets: ["` + grantsSecret + `"] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    effects:
      forward: { url: "` + url + `", timeout: 2s }
`
}

// audit42ObsLogCount is how many events the log lines with message prefix
// msg stand for: each line one, plus its `suppressed`.
func audit42ObsLogCount(log, msg string) (lines, standsFor int) {
	for line := range strings.Lines(log) {
		var r struct {
			Msg        string `json:"msg"`
			Suppressed int    `json:"suppressed"`
		}
		if json.Unmarshal([]byte(line), &r) != nil || !strings.HasPrefix(r.Msg, msg) {
			continue
		}
		lines++
		standsFor += 1 + r.Suppressed
	}
	return lines, standsFor
}

// README: a dead letter's warn line is logged "at most 5 a second per
// provider with `suppressed`" (how many it stands for), as the rejections'
// lines are, "each line saying how many it stands for". The rejections'
// held-back count is written when the flood stops; the dead letters' is
// not: after a burst of 30 dead letters the warn lines stand for 11 or so,
// and nothing in the log ever tells the rest, while the metric says 30.
func TestAudit42ObsDeadLetterLinesTellTheWholeBurst(t *testing.T) {
	const n = 30
	url := audit42ObsReceiver(t, http.StatusServiceUnavailable)
	e := audit42ObsEnv(t, "  workers: 8\n  max_deliver: 1\n  backoff: [1s]", `  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    type: "json:/type"
    effects:
      forward: { url: "`+url+`", timeout: 5s }
`)
	in := start(t, e.cfgPath)
	for i := range n {
		body := []byte(fmt.Sprintf(`{"grant_id":"G-%d","type":"a","occurred_at":"2026-11-30T12:00:00Z"}`, i))
		expect(t, post(t, in.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprintf("dl-%d", i), body), body), 200, "status", "accepted")
	}
	waitFor(t, "30 dead letters in the metric", 30*time.Second, func() bool {
		v, _ := metric(t, in.baseURL, `hookgate_consumer_events_total{decision="dead-lettered",provider="grants"}`)
		return v == n
	})
	// The rejections' held-back count is written within about a second of
	// the flood's end; give the dead letters' five.
	end := time.Now().Add(5 * time.Second)
	lines, standsFor := audit42ObsLogCount(in.stderr.String(), "event dead-lettered")
	for standsFor != n && time.Now().Before(end) {
		time.Sleep(100 * time.Millisecond)
		lines, standsFor = audit42ObsLogCount(in.stderr.String(), "event dead-lettered")
	}
	if standsFor != n {
		t.Fatalf("%d dead letters (metric, DLQ); the log's %d 'event dead-lettered' lines stand for %d (each 1 + its suppressed), 5s after the last", n, lines, standsFor)
	}
}

// The contract: an AUDIT record's `suppressed` is "how many like records
// were folded in". A burst of 401s (bad signatures) followed by one 400
// (invalid JSON) of the same provider, within the second: the 400's record
// is written last and carries the held-back 401s in its `suppressed`, so
// AUDIT tells fewer 401s and more 400s than were answered (review Z kept
// 429s apart from the rejections for this reason; 401 and 400 still share).
func TestAudit42ObsSuppressedFoldsOnlyLikeRecords(t *testing.T) {
	const bad = 12
	e := audit42ObsEnv(t, "  workers: 2", `  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
`)
	in := start(t, e.cfgPath)
	for range bad {
		h := http.Header{}
		h.Set("webhook-id", "x")
		h.Set("webhook-timestamp", fmt.Sprint(time.Now().Unix()))
		h.Set("webhook-signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
		if r := post(t, in.baseURL+"/webhooks/grants", h, []byte(`{}`)); r.status != http.StatusUnauthorized {
			t.Fatalf("bad signature: %d %s", r.status, r.body)
		}
	}
	body := []byte(`not json`)
	if r := post(t, in.baseURL+"/webhooks/grants", signGrants(t, "bad-json", body), body); r.status != http.StatusBadRequest {
		t.Fatalf("invalid JSON: %d %s", r.status, r.body)
	}
	j := natsClient(t, e.natsURL, natsToken)
	told := map[int]int{}
	waitFor(t, "AUDIT to account for all 13 rejections", 10*time.Second, func() bool {
		clear(told)
		total := 0
		for _, r := range audit42ObsAudit(t, j) {
			if r.Decision == "rejected" {
				told[r.Status] += 1 + r.Suppressed
				total += 1 + r.Suppressed
			}
		}
		return total == bad+1
	})
	if told[http.StatusUnauthorized] != bad || told[http.StatusBadRequest] != 1 {
		t.Fatalf("answered %d x 401 and 1 x 400; AUDIT's rejected records (each 1 + suppressed) tell %d x 401 and %d x 400", bad, told[http.StatusUnauthorized], told[http.StatusBadRequest])
	}
}

// A consumer-only serve with nats.url pointed at an embedded hookgate's
// listen address (README: "A consumer ... reaching the embedded server
// that way" is allowed; a gateway is refused) takes the consumer lock,
// which the embedded serve does not hold, and both pull side by side:
// `status` lists both APPLYING yes and reads `PROBLEMS none`, and the
// second logs that it redelivers what "a stopped process" fetched while
// the first runs on (when the first holds deliveries). hookgate_consumer_applying sums to 2 (README: alert
// when the sum is not 1), so at least status must say it.
func TestAudit42ObsTwoInstancesApplyingIsAProblem(t *testing.T) {
	e := audit42ObsEnv(t, "  workers: 2", `  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
`)
	in := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-1","occurred_at":"2026-11-30T12:00:00Z"}`)
	expect(t, post(t, in.baseURL+"/webhooks/grants", signGrants(t, "one", body), body), 200, "status", "accepted")

	second := filepath.Join(e.dir, "consumer.yaml")
	tokenURL := strings.Replace(e.natsURL, "nats://", "nats://"+natsToken+"@", 1)
	if err := os.WriteFile(second, []byte(fmt.Sprintf(`http:
  listen: "127.0.0.1:%d"
roles: { gateway: false, consumer: true }
nats:
  url: %q
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
`, audit42ObsPort(t), tokenURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := spawnServe(t, second)
	var applying int
	var problems []string
	waitFor(t, "status to list both serves ready", 30*time.Second, func() bool {
		r := runHG(t, "status", "--json", "--config", e.cfgPath)
		var s struct {
			Instances []statusInstance `json:"instances"`
			Problems  []string         `json:"problems"`
		}
		if json.Unmarshal([]byte(r.stdout), &s) != nil || len(s.Instances) < 2 {
			return false
		}
		applying, problems = 0, s.Problems
		for _, i := range s.Instances {
			if !i.Ready {
				return false
			}
			if i.Applying {
				applying++
			}
		}
		return true
	})
	if applying > 1 && len(problems) == 0 {
		t.Fatalf("%d instances apply events on one embedded store at once (status APPLYING yes for both; the consumer-only serve logged %q); status problems %q", applying, grepString(c.stderr.String(), "consumer lock"), problems)
	}
}

// README, "Events lost to max_age": once a stored event has left WEBHOOKS
// at its max_age unapplied, the consuming serve tells it (an error line,
// hookgate_consumer_events_expired_total, an AUDIT record
// `expired-unapplied` that status lists and trace shows). An event first
// delivered late in its life (its consumer was down a while) whose forward
// fails and whose retry comes after its max_age (backoff shorter than
// max_age: config check warns of nothing) leaves WEBHOOKS while it waits:
// it is lost, and nothing tells it: the metric stays 0, no error line, no
// AUDIT record, status reads PROBLEMS none, trace ends at `accepted`.
func TestAudit42ObsEventExpiredWhileRetryingIsTold(t *testing.T) {
	url := audit42ObsReceiver(t, http.StatusServiceUnavailable)
	write := func(e *env, consumer bool) {
		cfg := fmt.Sprintf(`http:
  listen: "127.0.0.1:%d"
roles: { gateway: true, consumer: %v }
nats:
  embedded:
    data_dir: %q
    listen: %q
    token: %q
dedup: { horizon: 10s, window: 10s }
retention:
  webhooks: { max_age: 15s, max_bytes: 100MB }
  grants: { max_age: 15s, max_bytes: 100MB }
consumer:
  max_deliver: 2
  backoff: [10s]
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: ["%s"], tolerance: 5s }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    effects:
      forward: { url: %q, timeout: 2s }
`, audit42ObsPort(t), consumer, filepath.Join(e.dir, "data"), strings.TrimPrefix(e.natsURL, "nats://"), natsToken, grantsSecret, url)
		if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := audit42ObsEnv(t, "", "")
	write(e, false)
	if r := runHG(t, "config", "check", e.cfgPath); r.code != 0 || strings.Contains(r.stdout+r.stderr, "backoff") {
		t.Fatalf("config check: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	gw := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-1","occurred_at":"2026-11-30T12:00:00Z"}`)
	expect(t, post(t, gw.baseURL+"/webhooks/grants", signGrants(t, "late", body), body), 200, "status", "accepted")
	stored := time.Now()
	gw.stop(t)
	// The consumer comes back 7 s after the event was stored: its first
	// try fails, and its retry (10 s later) comes after the 15 s max_age.
	time.Sleep(time.Until(stored.Add(7 * time.Second)))
	write(e, true)
	in := start(t, e.cfgPath)
	in.letsExpire = true
	waitFor(t, "the first try", 10*time.Second, func() bool {
		v, _ := metric(t, in.baseURL, `hookgate_consumer_events_total{decision="retry",provider="grants"}`)
		return v >= 1
	})
	j := natsClient(t, e.natsURL, natsToken)
	waitFor(t, "the event to leave WEBHOOKS at max_age", 30*time.Second, func() bool {
		s, err := j.Stream(context.Background(), "WEBHOOKS")
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	// Past the retry's time (10 s, up to 12 s with jitter), give it 15 s
	// to tell the loss.
	var expired float64
	var told bool
	var problems []string
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) {
		expired, _ = metric(t, in.baseURL, "hookgate_consumer_events_expired_total")
		for _, r := range audit42ObsAudit(t, j) {
			if r.Decision == "expired-unapplied" {
				told = true
			}
		}
		if expired > 0 || told {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var s struct {
		Problems []string `json:"problems"`
	}
	_ = json.Unmarshal([]byte(runHG(t, "status", "--json", "--config", e.cfgPath).stdout), &s)
	problems = s.Problems
	tr := runHG(t, "trace", "grants:default:evt:late", "--config", e.cfgPath)
	if expired == 0 && !told {
		t.Fatalf("an event left WEBHOOKS at max_age unapplied while it waited for its retry: hookgate_consumer_events_expired_total %v, no AUDIT expired-unapplied, error lines %q, status problems %q, trace:\n%s",
			expired, grepString(in.stderr.String(), `"ERROR"`), problems, tr.stdout)
	}
}

// The log's stable keys for an event are `provider`, `account`, `key`,
// `subject`, `seq`, `decision` (the dead-letter line carries them all).
// The `event will be retried` warn line, the one the README and trace send
// an operator to for an event waiting out a retry, has `provider` and
// `key` only: no `account`, `subject`, `seq` or `decision`, so a search of
// the log by subject or WEBHOOKS seq misses it.
func TestAudit42ObsRetryLineHasTheEventsKeys(t *testing.T) {
	url := audit42ObsReceiver(t, http.StatusServiceUnavailable)
	e := audit42ObsEnv(t, "  max_deliver: 3\n  backoff: [10s]", audit42ObsForwarding(url))
	in := start(t, e.cfgPath)
	body := []byte(`{"grant_id":"G-7","occurred_at":"2026-11-30T12:00:00Z"}`)
	expect(t, post(t, in.baseURL+"/webhooks/grants", signGrants(t, "retry-me", body), body), 200, "status", "accepted")
	var line string
	waitFor(t, "the retry line", 20*time.Second, func() bool {
		line = grepString(in.stderr.String(), "event will be retried")
		return line != ""
	})
	var r map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &r); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, k := range []string{"provider", "account", "key", "subject", "seq", "decision"} {
		if _, ok := r[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the retry line lacks %v: %s", missing, line)
	}
}

// README (status PROBLEMS): "events delivered again and not yet settled
// ... an effect failing and waiting for its retry, such as a `forward`
// receiver that is down" is a problem line; before stop 38 "a receiver
// refusing every event read PROBLEMS none" during its retries. Between
// the first failed try and the first retry (consumer.backoff's first
// step) nothing has been delivered again, and status reads PROBLEMS none
// while the receiver refuses every event.
func TestAudit42ObsFailedTryIsAProblemBeforeItsRetry(t *testing.T) {
	url := audit42ObsReceiver(t, http.StatusServiceUnavailable)
	e := audit42ObsEnv(t, "  max_deliver: 3\n  backoff: [20s]", audit42ObsForwarding(url))
	in := start(t, e.cfgPath)
	for i := range 3 {
		body := []byte(fmt.Sprintf(`{"grant_id":"G-%d","occurred_at":"2026-11-30T12:00:00Z"}`, i))
		expect(t, post(t, in.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprintf("refused-%d", i), body), body), 200, "status", "accepted")
	}
	waitFor(t, "three failed tries", 15*time.Second, func() bool {
		v, _ := metric(t, in.baseURL, `hookgate_consumer_events_total{decision="retry",provider="grants"}`)
		return v >= 3
	})
	var s struct {
		Instances []statusInstance `json:"instances"`
		Problems  []string         `json:"problems"`
	}
	// The serve's own readiness answer lags its start by a second or two.
	waitFor(t, "status to list the serve ready", 10*time.Second, func() bool {
		r := runHG(t, "status", "--json", "--config", e.cfgPath)
		return json.Unmarshal([]byte(r.stdout), &s) == nil && len(s.Instances) == 1 && s.Instances[0].Ready
	})
	if len(s.Problems) == 0 {
		t.Fatalf("the receiver refused all 3 events (3 failed tries, each waiting 20s for its retry); status problems %q", s.Problems)
	}
}

// Contract: "a failed audit write is counted in a metric and logged";
// README: hookgate_audit_write_failures_total counts AUDIT records lost
// ("each counted; logged as `audit write failed` at most 5 lines a second,
// each line's `suppressed` saying how many it stands for"), "also a
// record made while the writer stops". With AUDIT gone (deleted; on a
// cluster, its replicas without quorum while WEBHOOKS takes events), 20
// accepted webhooks lose their 20 `accepted` records: for 15 s the
// metric says 0 (one write at a time waits out its timeout), and by the
// stop the log's `audit write failed` lines stand for 6 of them; the
// rest are never told.
func TestAudit42ObsLostAuditRecordsAreAllTold(t *testing.T) {
	const n = 20
	e := audit42ObsEnv(t, "  workers: 2", `  grants:
    signature: { scheme: standard-webhooks, secrets: ["`+grantsSecret+`"] }
    event_id: ["header:webhook-id"]
`)
	in := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	if err := j.DeleteStream(context.Background(), "AUDIT"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		body := []byte(fmt.Sprintf(`{"n":%d}`, i))
		expect(t, post(t, in.baseURL+"/webhooks/grants", signGrants(t, fmt.Sprintf("lost-audit-%d", i), body), body), 200, "status", "accepted")
	}
	var counted float64
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) && counted < n {
		counted, _ = metric(t, in.baseURL, "hookgate_audit_write_failures_total")
		time.Sleep(200 * time.Millisecond)
	}
	in.stop(t)
	lines, told := audit42ObsLogCount(in.stderr.String(), "audit write failed")
	// Records the stop's flush had no time for are told by one line each
	// batch, with their number.
	for l := range strings.Lines(in.stderr.String()) {
		var line struct {
			Msg     string
			Records int
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "audit records lost at shutdown" {
			lines++
			told += line.Records
		}
	}
	if counted < n || told < n {
		t.Fatalf("%d AUDIT records lost (AUDIT missing): hookgate_audit_write_failures_total %v 15s after; at the stop %d 'audit write failed' lines stand for %d (each 1 + its suppressed)", n, counted, lines, told)
	}
}
