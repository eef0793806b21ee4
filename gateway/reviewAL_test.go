package gateway_test

// Review AL: the gateway under abuse and odd clients, over real loopback
// HTTP and a real embedded JetStream (newGateway).

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
)

// reviewALPost posts body to /webhooks/p with h and returns the status
// and the answer's body.
func reviewALPost(t *testing.T, srv *httptest.Server, h http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/p", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// reviewALStored is how many messages WEBHOOKS holds.
func reviewALStored(t *testing.T, srv *httptest.Server, envConn *jetstream.Conn) uint64 {
	t.Helper()
	s, err := envConn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// CONTRACT.md, HTTP: "same key seen before (within the horizon) | 200 |
// {"status":"duplicate",...}"; NATS: WEBHOOKS "Nats-Msg-Id = key" and
// "every request header except Authorization, Cookie, Proxy-* and
// hop-by-hop ones" is stored. The request headers are not signed (hmac-
// sha256, github, shopify, stripe sign the body only), and nats.go writes a
// message's headers in map order. nats-server finds Nats-Msg-Id with a
// byte search (getHeaderKeyIndex) that gives up when, after an occurrence
// not at a line start, the next one follows within two bytes: a stored
// header whose value is "Nats-Msg-IdNats-Msg-Id", written before the real
// Nats-Msg-Id, hides the key from the server's duplicate check. Anyone
// holding one captured delivery can then have it stored again and again
// as "accepted" (each time a full copy in WEBHOOKS, which is DiscardNew:
// a full stream answers 503 to every provider). The gateway now refuses
// such a request (400 naming the header): nothing is stored for it. The
// key's own text (an event id from the body) and the extracted values are
// checked the same way.
func TestReviewALHeaderValueHidesKeyFromDedup(t *testing.T) {
	srv, env, _ := newGateway(t, "")
	body := `{"id":"al-dedup","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
	if code, ans := reviewALPost(t, srv, signed(t, body), body); code != 200 || !strings.Contains(ans, `"accepted"`) {
		t.Fatalf("first delivery: %d %s", code, ans)
	}
	// The same signed delivery, re-sent with unsigned extra headers. Several
	// of them, so that (in nats.go's random map order) one is almost
	// surely written before Nats-Msg-Id; a few tries make it certain.
	for try := range 4 {
		h := signed(t, body)
		for i := range 24 {
			h.Set(fmt.Sprintf("X-Pad-%02d", i), "Nats-Msg-IdNats-Msg-Id")
		}
		code, ans := reviewALPost(t, srv, h, body)
		if code != 400 || !strings.Contains(ans, "X-Pad-") || !strings.Contains(ans, "Nats-Msg-Id") {
			t.Errorf("re-sent delivery (try %d) with header values \"Nats-Msg-IdNats-Msg-Id\": %d %s, want 400 naming the header", try, code, ans)
		}
	}
	// An event id from the body that would hide the key from itself (the
	// Hookgate-Key header holds it too).
	idBody := `{"id":"Nats-Msg-Id-Nats-Msg-Id","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
	if code, ans := reviewALPost(t, srv, signed(t, idBody), idBody); code != 400 || !strings.Contains(ans, "Hookgate-Key") {
		t.Errorf("event id \"Nats-Msg-Id-Nats-Msg-Id\": %d %s, want 400 naming Hookgate-Key", code, ans)
	}
	if n := reviewALStored(t, srv, env.Conn); n != 1 {
		t.Errorf("WEBHOOKS holds %d messages for one key, want 1", n)
	}
}

func TestHidesNatsHeader(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string // "" when harmless
	}{
		{"", ""},
		{"application/json", ""},
		{"Nats-Msg-Id", ""},
		{"x Nats-Msg-Id y Nats-Msg-Id", ""}, // three bytes apart: the search goes on
		{"Nats-Msg-IdNats-Msg-Id", "Nats-Msg-Id"},
		{"aNats-Msg-Id:Nats-Msg-Id", "Nats-Msg-Id"},
		{"Nats-Expected-Last-Subject-SequenceXNats-Expected-Last-Subject-Sequence", "Nats-Expected-Last-Subject-Sequence"},
		{"Nats-Expected-StreamNats-Expected-Stream", "Nats-Expected-Stream"},
		{"Nats-Msg-Id Nats-Expected-Stream", ""},
		{"NATS-MSG-IDNATS-MSG-ID", ""}, // the server's search is case-sensitive
	} {
		k, bad := gateway.HidesNatsHeader(tc.text)
		if got := map[bool]string{true: k, false: ""}[bad]; got != tc.want {
			t.Errorf("hidesNatsHeader(%q) = %q, %v; want %q", tc.text, k, bad, tc.want)
		}
	}
}

// CONTRACT.md, HTTP: "same key seen before | 200 | duplicate"; the
// Publisher's promise "exactly once per key". The same delivery posted 50
// times at once: one "accepted", 49 "duplicate", one stored message.
func TestReviewALSameKeyFiftyAtOnce(t *testing.T) {
	srv, env, audit := newGateway(t, "")
	body := `{"id":"al-conc","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`
	h := signed(t, body)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for range 50 {
		wg.Go(func() {
			code, ans := reviewALPost(t, srv, h, body)
			var a struct{ Status, Key string }
			_ = json.Unmarshal([]byte(ans), &a)
			mu.Lock()
			answers[fmt.Sprint(code, " ", a.Status, " ", a.Key)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if answers["200 accepted p:default:evt:al-conc"] != 1 || answers["200 duplicate p:default:evt:al-conc"] != 49 {
		t.Errorf("answers %v, want one accepted and 49 duplicates", answers)
	}
	if n := reviewALStored(t, srv, env.Conn); n != 1 {
		t.Errorf("WEBHOOKS holds %d messages, want 1", n)
	}
	audit.mu.Lock()
	defer audit.mu.Unlock()
	var acc, dup int
	for _, r := range audit.recs {
		switch r.Decision {
		case event.DecisionAccepted:
			acc++
		case event.DecisionDuplicate:
			dup++
		}
	}
	if acc != 1 || dup != 49 {
		t.Errorf("audit: %d accepted, %d duplicate; want 1 and 49", acc, dup)
	}
}

// Valid and forged requests at once, with a flood of forged ones: every
// valid one answered 200 accepted and stored exactly once; every forged
// one 401, nothing stored for it; AUDIT's rejected records (each standing
// for 1 + suppressed) add up to the forged requests once the held-back
// record has been written ("When no record follows within the second ...
// the last one held back is written then, carrying the others"), and at
// most 5 records (and log lines) per second while the flood lasts.
func TestReviewALMixedFlood(t *testing.T) {
	var log lockedBuffer
	srv, env, audit := newGatewayLog(t, "", slog.New(slog.NewJSONHandler(&log, nil)))
	const valid, forged = 60, 600
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var mu sync.Mutex
	bad := []string{}
	for i := range valid + forged {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if i%11 == 0 && i/11 < valid {
				n := i / 11
				body := fmt.Sprintf(`{"id":"al-mix-%d","grant_id":"G-%d","at":"2026-11-30T10:00:00Z"}`, n, n)
				code, ans := reviewALPost(t, srv, signed(t, body), body)
				if code != 200 || !strings.Contains(ans, `"accepted"`) {
					mu.Lock()
					bad = append(bad, fmt.Sprint("valid ", n, ": ", code, ans))
					mu.Unlock()
				}
				return
			}
			body := fmt.Sprintf(`{"id":"al-forged-%d"}`, i)
			h := http.Header{"X-Sig": {"sha256=" + strings.Repeat("0", 64)}}
			switch i % 3 {
			case 1:
				h = http.Header{}
			case 2:
				h.Add("X-Sig", "sha256=00")
			}
			if code, _ := reviewALPost(t, srv, h, body); code != 401 {
				mu.Lock()
				bad = append(bad, fmt.Sprint("forged ", i, ": ", code))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	nValid := 0
	for i := range valid + forged {
		if i%11 == 0 && i/11 < valid {
			nValid++
		}
	}
	nForged := valid + forged - nValid
	if len(bad) > 0 {
		t.Fatalf("%d wrong answers, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	if n := reviewALStored(t, srv, env.Conn); n != uint64(nValid) {
		t.Errorf("WEBHOOKS holds %d, want %d", n, nValid)
	}
	// The held-back record is written about a second after the flood.
	var total, records int
	for end := time.Now().Add(10 * time.Second); ; {
		audit.mu.Lock()
		total, records = 0, 0
		for _, r := range audit.recs {
			if r.Decision == event.DecisionRejected {
				total += 1 + r.Suppressed
				records++
			}
		}
		audit.mu.Unlock()
		if total == nForged || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if total != nForged {
		t.Errorf("rejected records stand for %d requests (%d records), want %d", total, records, nForged)
	}
	if lines := strings.Count(log.String(), `"msg":"webhook rejected"`); lines != records {
		t.Errorf("%d log lines for %d records", lines, records)
	}
	t.Logf("%d forged requests: %d records", nForged, records)
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`hookgate_gateway_requests_total{decision="rejected",provider="p",status="401"} %d`, nForged),
		fmt.Sprintf(`hookgate_gateway_requests_total{decision="accepted",provider="p",status="200"} %d`, nValid),
	} {
		if !strings.Contains(string(text), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	t.Logf("%s", grepLines(string(text), "suppressed"))
}

// README, "HTTP answers": "Held-back rejections, 429s included, are
// counted in hookgate_gateway_audit_suppressed_total{provider}". Its help
// said "folded into a later record's suppressed count", but the record
// held back and then written late (the flood stopped) is counted there
// too: the metric is one above the sum of the records' `suppressed` for
// every late write (review AL). Kept, as held back (the count is there at
// once, not a second later), and the help and README now say so; this
// pins that relation.
func TestReviewALSuppressedMetricCountsLateWrittenRecord(t *testing.T) {
	var mu sync.Mutex
	var late []func()
	clock := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	srv, _, audit := newGateway(t, "", func(d *gateway.Deps) {
		d.Now = func() time.Time { return clock }
		d.AfterFunc = func(_ time.Duration, f func()) *time.Timer {
			mu.Lock()
			late = append(late, f)
			mu.Unlock()
			return time.NewTimer(time.Hour)
		}
	})
	const forged = 20
	for range forged {
		if r := do(t, srv, http.Header{"X-Sig": {"sha256=00"}}, `{"id":"x"}`); r.StatusCode != 401 {
			t.Fatalf("forged: %d", r.StatusCode)
		}
	}
	// The end of the second: the held-back record is written.
	mu.Lock()
	fs := late
	mu.Unlock()
	for _, f := range fs {
		f()
	}
	audit.mu.Lock()
	records, suppressed := 0, 0
	for _, r := range audit.recs {
		if r.Decision == event.DecisionRejected {
			records++
			suppressed += r.Suppressed
		}
	}
	audit.mu.Unlock()
	if records+suppressed != forged {
		t.Fatalf("records %d + suppressed %d != %d forged requests", records, suppressed, forged)
	}
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// One burst, ended by the late write: one over AUDIT's sum.
	want := fmt.Sprintf(`hookgate_gateway_audit_suppressed_total{provider="p"} %d`, suppressed+len(fs))
	if len(fs) != 1 || !strings.Contains(string(text), want+"\n") {
		t.Errorf("AUDIT has %d records whose suppressed add up to %d, %d late writes; /metrics says\n%swant %s",
			records, suppressed, len(fs), grepLines(string(text), "audit_suppressed_total{"), want)
	}
}
