package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Audit 41 (operator at 3 a.m.): a forward receiver that is down for
// maintenance answers 503 with Retry-After (the common way a server says
// "not now"). hookgate honours it up to the longest consumer.backoff step
// (10m by default): the event waits that long for its next try, and the
// provider's other events wait untried. None of them is "delivered again"
// meanwhile, so `hookgate status` reads PROBLEMS none for those 10 minutes
// while every event stays unapplied: exactly the "receiver refusing every
// event reads PROBLEMS none" that stop 38 set out to end
// (TestRetryingEventIsVisible covers only a receiver without Retry-After).
func TestAudit41OpsReceiverRetryAfterPauseIsAProblem(t *testing.T) {
	var hits atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "600")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	// The default backoff, spelt out.
	path := forwardConfig(t, down.URL, "consumer: { max_deliver: 8, backoff: [1s, 5s, 30s, 2m, 10m] }")
	s := review7Start(t, path, true)
	for i, body := range []string{
		`{"id":"ra1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`,
		`{"id":"ra2","grant_id":"G-2","at":"2026-11-30T10:00:00Z"}`,
	} {
		if code := review6Post(t, s.base, body); code != 200 {
			t.Fatalf("post %d: %d", i, code)
		}
	}
	for end := time.Now().Add(20 * time.Second); hits.Load() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the receiver got no request in 20 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
	// The receiver refused; give status 10 s to say so (the events wait
	// 10 minutes).
	var st review9Result
	var doc struct {
		Problems []string `json:"problems"`
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st = review9Run(t, "", "status", "--json", "--config", path)
		if err := json.Unmarshal([]byte(st.stdout), &doc); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, st.stdout, st.stderr)
		}
		for _, p := range doc.Problems {
			// The instance's readiness, checked each second, may still
			// read "not ready" from its start for a moment: not this.
			if !strings.Contains(p, "not ready") {
				return
			}
		}
		if time.Now().After(end) {
			break
		}
	}
	text := review9Run(t, "", "status", "--config", path)
	t.Fatalf("the forward receiver answered 503 + Retry-After to every event (%d requests), nothing applied, yet status lists no problem "+
		"(and will not until the first retry, 10 minutes later):\n%s", hits.Load(), head(text.stdout, 25))
}

// head is s's first n lines.
func head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}

// The README ("Operating hookgate"): "`-h` or `--help` after any of them
// ... prints its usage and flags on stdout, exit 0". `hookgate version
// --help` is a usage error, exit 2 ("version: unexpected argument").
func TestAudit41OpsVersionAnswersHelp(t *testing.T) {
	for _, h := range []string{"--help", "-h"} {
		r := review9Run(t, "", "version", h)
		if r.code != 0 || !strings.Contains(r.stdout, "hookgate version") {
			t.Errorf("hookgate version %s: exit %d, stdout %q, stderr %q; want exit 0 and its usage line on stdout", h, r.code, r.stdout, r.stderr)
		}
	}
}

// Audit 41: serve refuses to start when a listener's port is taken, and
// its one line should name the key to fix, as it does for the embedded
// server ("nats.embedded.listen 127.0.0.1:P: ... address already in
// use"). For http.listen and http.admin_listen it says only "listen
// 127.0.0.1:P: listen tcp ...": with both set to one port written two
// ways (localhost and 127.0.0.1, which config check passes) the operator
// cannot tell from it which of the two keys collides.
func TestAudit41OpsBusyHTTPPortNamesTheKey(t *testing.T) {
	for _, key := range []string{"http.listen", "http.admin_listen"} {
		t.Run(key, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			httpBlock := fmt.Sprintf("http: { listen: %q }", busy.Addr().String())
			if key == "http.admin_listen" {
				httpBlock = fmt.Sprintf("http: { listen: %q, admin_listen: %q }", freeAddr(t), busy.Addr().String())
			}
			path := filepath.Join(t.TempDir(), "hookgate.yaml")
			yaml := fmt.Sprintf("%s\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", httpBlock, t.TempDir(), freeAddr(t), review6Provider)
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			r := review9Run(t, "", "serve", "--config", path)
			if r.code != 1 || !strings.Contains(r.stderr, "address already in use") {
				t.Fatalf("serve on a busy port: exit %d, stderr:\n%s", r.code, tail(r.stderr, 1500))
			}
			last := strings.TrimSpace(r.stderr)
			last = last[strings.LastIndex(last, "\n")+1:]
			if !strings.Contains(last, key) {
				t.Errorf("serve's refusal does not name %s: %q", key, last)
			}
		})
	}
}

// Audit 41: once WEBHOOKS refuses webhooks for want of room (senders get
// 503 "event store full" with Retry-After), status's problem line still
// speaks of it as ahead: "stream WEBHOOKS at 99.9% of its max_bytes ...:
// once full, webhooks are answered 503" (GRANTS: "at 100.0% ...: once
// full, events that publish fail"). At 3 a.m. that reads as "not yet":
// the operator learns only from the senders that every new event is
// being refused now.
func TestAudit41OpsFullWebhooksSaysItRefusesNow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\", max_body_bytes: 4096 }\nroles: { consumer: false }\nretention: { webhooks: { max_bytes: 16KB } }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		t.TempDir(), freeAddr(t), review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, true)
	client := &http.Client{Timeout: 20 * time.Second}
	full := false
	for i := 0; i < 1000 && !full; i++ {
		code, _, err := review7Send(client, s.base, fmt.Sprintf("full-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		switch code {
		case 200:
		case 503:
			full = true
		default:
			t.Fatalf("event %d: %d", i, code)
		}
	}
	if !full {
		t.Fatal("WEBHOOKS of 16 KB took 1000 events")
	}
	st := review9Run(t, "", "status", "--config", path)
	var line string
	for _, l := range strings.Split(st.stdout, "\n") {
		if strings.Contains(l, "stream WEBHOOKS at") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("WEBHOOKS answers 503 (full) and status has no problem line for it:\n%s", head(st.stdout, 12))
	}
	if strings.Contains(line, "once full") {
		t.Errorf("WEBHOOKS answers every new webhook 503 (full), and status says it will once full:\n%s", line)
	}
}

// Audit 41: while one event waits out its backoff (its receiver down),
// every restart of serve, a clean SIGTERM included, resets the durable
// consumer to its ack floor, and the events settled above it run again:
// an event dead-lettered meanwhile (a 400 from its receiver) is POSTed to
// the receiver again and dead-lettered a second time, so DLQ holds two
// identical letters of it (three after the next restart), `status` counts
// them all as dead letters, and `dlq list` shows each event twice. The
// README says only that such an event "is tried again, its letter
// deduplicated within dedup.window" (2m by default: restarts come later
// than that); review BH made replay keep one letter per event for the
// same reason ("which `dlq replay --all` re-fed twice").
func TestAudit41OpsRestartDoesNotDoubleDeadLetters(t *testing.T) {
	audit41RestartAfterALetter(t, false)
}

// audit41RestartAfterALetter: an event (hold1) waits out a 10m backoff, so
// the restart resets the consumer to below bad1, which its receiver
// refused for good and was dead-lettered; remove: the operator removed its
// letter before the restart. After a clean restart (past DLQ's duplicate
// window) bad1 has the letters it had, and its receiver got it once.
func audit41RestartAfterALetter(t *testing.T, remove bool) {
	var badPosts atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch key := r.Header.Get("Idempotency-Key"); {
		case strings.Contains(key, "hold"):
			w.WriteHeader(http.StatusServiceUnavailable) // down for this one: retried after 10m
		case strings.Contains(key, "bad"):
			badPosts.Add(1)
			w.WriteHeader(http.StatusBadRequest) // refused for good: dead-lettered at once
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer recv.Close()
	path := forwardConfig(t, recv.URL, "dedup: { window: 1s }\nconsumer: { max_deliver: 8, backoff: [10m] }")
	s := review7Start(t, path, true)
	for _, body := range []string{
		`{"id":"hold1","grant_id":"H-1","at":"2026-11-30T10:00:00Z"}`,
		`{"id":"bad1","grant_id":"B-1","at":"2026-11-30T10:00:00Z"}`,
	} {
		if code := review6Post(t, s.base, body); code != 200 {
			t.Fatalf("post %s: %d", body, code)
		}
	}
	letters := func() []string {
		var seqs []string
		r := review9Run(t, "", "dlq", "list", "--config", path)
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == "p:default:evt:bad1" {
				seqs = append(seqs, f[0])
			}
		}
		return seqs
	}
	for end := time.Now().Add(20 * time.Second); len(letters()) != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("bad1 not dead-lettered in 20 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
	want := 1
	if remove {
		seq := letters()[0]
		if r := review9Run(t, "", "dlq", "remove", seq, "--config", path); r.code != 0 {
			t.Fatalf("dlq remove %s: exit %d\n%s%s", seq, r.code, r.stdout, r.stderr)
		}
		want = 0
	}
	// Past DLQ's duplicate window (dedup.window, 1s here; 2m by default).
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s2 := review7Start(t, path, true)
	afterSubjectSettles(t, s2, path)
	if got := letters(); len(got) != want {
		r := review9Run(t, "", "dlq", "list", "--config", path)
		t.Fatalf("after a clean restart, bad1 (dead-lettered once, letters removed: %t; its receiver POSTed %d times in all) has letters %v in DLQ, want %d:\n%s\nserve:\n%s",
			remove, badPosts.Load(), got, want, r.stdout, tail(s2.stderr.String(), 1500))
	}
	if n := badPosts.Load(); n != 1 {
		t.Errorf("the receiver got bad1 %d times; it refused it once, for good", n)
	}
}

// Audit 41: the serves that answer all lack the consumer role (a config
// rolled out with roles: { consumer: false }, or the consumer half of a
// split deployment not started again), so nothing applies events: they
// pile up in WEBHOOKS (status's own CONSUMER row shows PENDING growing,
// LAST ACTIVE "-"). status lists "no instance applies events" only when
// some serve with the consumer role answers; with none it says PROBLEMS
// none, and keeps saying it until the oldest event is half of
// WEBHOOKS's max_age old (15 days by default), the step before it is
// lost.
func TestAudit41OpsNoConsumerRoleIsAProblem(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	write := func(extra string) string {
		path := filepath.Join(t.TempDir(), "hookgate.yaml")
		yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\n%snats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", extra, dataDir, natsListen, review6Provider)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	both, gatewayOnly := write(""), write("roles: { consumer: false }\n")

	// A serve with both roles ran before: the durable consumer exists.
	s := review7Start(t, both, true)
	if code := review6Post(t, s.base, `{"id":"c1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post c1: %d", code)
	}
	type statusDoc struct {
		Problems  []string `json:"problems"`
		Consumers []struct {
			Exists     bool   `json:"exists"`
			NumPending uint64 `json:"num_pending"`
			AckFloor   uint64 `json:"ack_floor_stream_seq"`
		} `json:"consumers"`
	}
	read := func(path string) statusDoc {
		r := review9Run(t, "", "status", "--json", "--config", path)
		var doc statusDoc
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, r.stdout, r.stderr)
		}
		return doc
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if d := read(both); len(d.Consumers) > 0 && d.Consumers[0].AckFloor >= 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("c1 not applied in 20 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// Now only a gateway runs on the store.
	g := review7Start(t, gatewayOnly, true)
	if code := review6Post(t, g.base, `{"id":"c2","grant_id":"G-2","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post c2: %d", code)
	}
	var d statusDoc
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		d = read(gatewayOnly)
		for _, p := range d.Problems {
			if !strings.Contains(p, "not ready") {
				return
			}
		}
		if time.Now().After(end) {
			break
		}
	}
	text := review9Run(t, "", "status", "--config", gatewayOnly)
	t.Fatalf("only a gateway-only serve answers, nothing applies events (pending %+v), and status lists no problem:\n%s", d.Consumers, head(text.stdout, 24))
}

// Audit 41: the dead-letter log line says "event dead-lettered: 'hookgate
// dlq list' shows it, 'hookgate dlq replay' re-feeds it" and carries
// "seq": the event's WEBHOOKS sequence, not the letter's DLQ sequence that
// `dlq show SEQ` and `dlq replay SEQ` take (the letter's is not in the
// line at all). The operator paged by the line runs `hookgate dlq replay
// <seq>` and gets "no letter N", or re-feeds another event's letter.
func TestAudit41OpsDeadLetterLineNamesTheLetter(t *testing.T) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Idempotency-Key"), "bad") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	path := forwardConfig(t, recv.URL, "")
	s := review7Start(t, path, true)
	for _, body := range []string{
		`{"id":"ok1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`,
		`{"id":"ok2","grant_id":"G-2","at":"2026-11-30T10:00:00Z"}`,
		`{"id":"bad1","grant_id":"G-3","at":"2026-11-30T10:00:00Z"}`,
	} {
		if code := review6Post(t, s.base, body); code != 200 {
			t.Fatalf("post %s: %d", body, code)
		}
	}
	var line map[string]any
	for end := time.Now().Add(20 * time.Second); line == nil; time.Sleep(50 * time.Millisecond) {
		for _, l := range strings.Split(s.stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && strings.HasPrefix(fmt.Sprint(m["msg"]), "event dead-lettered") && m["key"] == "p:default:evt:bad1" {
				line = m
			}
		}
		if line == nil && time.Now().After(end) {
			t.Fatalf("no dead-letter line for bad1 in 20 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
	// The letter's DLQ sequence, as dlq list shows it.
	r := review9Run(t, "", "dlq", "list", "--config", path)
	var letter string
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == "p:default:evt:bad1" {
			letter = f[0]
		}
	}
	if letter == "" {
		t.Fatalf("dlq list has no letter of bad1:\n%s", r.stdout)
	}
	named := false
	for k, v := range line {
		if (k == "seq" || strings.Contains(strings.ToLower(k), "dlq") || strings.Contains(k, "letter")) && fmt.Sprint(v) == letter {
			named = true
		}
	}
	if !named {
		t.Errorf("the dead-letter line points to 'hookgate dlq list' and 'hookgate dlq replay' but does not name the letter's DLQ sequence %s; its \"seq\" is %v (the WEBHOOKS sequence): %v", letter, line["seq"], line)
	}
}

// Audit 41, the same reset seen from `dlq remove`: the operator takes a
// letter no re-feed can apply out of DLQ (audited dlq-removed, "the event
// stays in WEBHOOKS"), and the next restart of serve while another event
// waits out its backoff runs the event again and writes its letter back:
// the removal is undone, status lists the dead letter again, and the
// receiver that refused it for good gets it once more.
func TestAudit41OpsRemovedLetterStaysRemovedAcrossRestart(t *testing.T) {
	audit41RestartAfterALetter(t, true)
}

// afterSubjectSettles posts, to the restarted serve s, an event newer than
// bad1 of bad1's subject (B-1) and waits until it applied: the consumer
// runs a subject's events in order, so bad1's run again after the reset
// (if any) is over by then.
func afterSubjectSettles(t *testing.T, s *review7Serve, path string) {
	t.Helper()
	if code := review6Post(t, s.base, `{"id":"later1","grant_id":"B-1","at":"2026-11-30T10:00:01Z"}`); code != 200 {
		t.Fatalf("post later1: %d", code)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tr := review9Run(t, "", "trace", "p:default:evt:later1", "--config", path)
		if strings.Contains(tr.stdout, "applied") {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("later1, of bad1's subject, not applied within 30 s:\n%s%s\nserve:\n%s", tr.stdout, tr.stderr, tail(s.stderr.String(), 1500))
		}
	}
}

// dlq list and dlq show refuse --all and --dry-run, which they ignored
// without a word (an operations audit, stop 41), before reading any config.
func TestDLQListAndShowRefuseReplayFlags(t *testing.T) {
	for _, args := range [][]string{
		{"dlq", "list", "--all"}, {"dlq", "list", "--dry-run"}, {"dlq", "show", "3", "--dry-run"}, {"dlq", "show", "--all", "3"},
	} {
		r := review9Run(t, "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--all and --dry-run are for 'dlq replay' and 'dlq remove'") {
			t.Errorf("hookgate %s: exit %d, want 2 saying the flags are replay's and remove's\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}
