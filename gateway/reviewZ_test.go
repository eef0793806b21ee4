package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// reviewZRejectedLogged sums, over the "webhook rejected" log lines, how
// many requests of the given status they stand for (1 + suppressed each),
// and returns the lines' statuses.
func reviewZRejectedLogged(t *testing.T, logs string, status int) (n int, statuses []int) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var l struct {
			Msg        string `json:"msg"`
			Status     int    `json:"status"`
			Suppressed int    `json:"suppressed"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if l.Msg != "webhook rejected" {
			continue
		}
		statuses = append(statuses, l.Status)
		if l.Status == status {
			n += 1 + l.Suppressed
		}
	}
	return n, statuses
}

// README, "HTTP answers": the log carries "rejections (warn; at most 5
// per provider per second, like their AUDIT records, each line saying how
// many it stands for)". 429s share that limit with 401/400/413 but write
// no log line: a sender over its rate_limit uses up the provider's 5
// slots a second, and a forged or mis-signed request (401) arriving
// among them is held back behind a 429, whose late record carries it into
// AUDIT only. The log then has no line for the 401 and no line counting
// it: an operator grepping "webhook rejected" at 3 a.m. is told no
// request was refused for its signature, while
// hookgate_gateway_requests_total{status="401"} says one was.
func TestReviewZUnauthorizedHiddenBehindRateLimitedInLog(t *testing.T) {
	cfg := mustConfig(t, `
providers:
  gh:
    signature: { scheme: github, secrets: ["s3cret"] }
    rate_limit: { per_second: 1, burst: 1 }
`)
	now := time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC) // a clock that stands still: one window
	var logs lockedLog
	reg := prometheus.NewRegistry()
	h, err := gateway.NewServer(slog.New(slog.NewJSONHandler(&logs, nil)), cfg, gateway.Deps{
		Publisher: &review9fStore{}, Audit: &review9fAudit{}, Registry: reg, Gatherer: reg,
		Ready: func(context.Context) error { return nil },
		Now:   func() time.Time { return now },
		// The end-of-second write comes from FlushHeld below, not wall time.
		AfterFunc: func(time.Duration, func()) *time.Timer { return time.NewTimer(time.Hour) },
	})
	if err != nil {
		t.Fatal(err)
	}
	var codes []int
	post := func(body string, good bool) { codes = append(codes, review9fPost(h, body, good)) }
	post(`{"id":"ok"}`, true) // the burst: 200
	for i := range 5 {
		post(fmt.Sprintf(`{"id":"r%d"}`, i), true) // 429s: the second's 5 records
	}
	post(`{"id":"forged"}`, false) // 401, held back
	post(`{"id":"again"}`, true)   // 429, held back after it
	h.FlushHeld()                  // the end of the second (or a stop)
	want := []int{200, 429, 429, 429, 429, 429, 401, 429}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("setup: answers %v, want %v", codes, want)
	}
	n, statuses := reviewZRejectedLogged(t, logs.String(), http.StatusUnauthorized)
	if n != 1 {
		t.Fatalf("the \"webhook rejected\" log lines account for %d of the 1 request answered 401 (lines' statuses: %v); its count went into a 429's AUDIT record, which logs nothing", n, statuses)
	}
}

// reviewZCounter is the value of the counter name with exactly the given
// labels in reg, and whether that series is exported at all.
func reviewZCounter(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// README's alert for hookgate_gateway_requests_total is "`unavailable`
// rising: senders get 503". The accepted and duplicate series of each
// provider are exported at 0 from the start (providerMetrics), the
// unavailable one is not: it is born at its first 503. Prometheus's
// rate()/increase() see no rise in a series whose first sample is
// already N, so a store outage shorter than the scrape interval plus one
// (the first one after a start, the one that matters) leaves the series
// at N with increase() 0: the documented alert never fires, though every
// sender got 503. The series must be there at 0 before the first 503.
func TestReviewZUnavailableSeriesBornAtFirst503(t *testing.T) {
	cfg := mustConfig(t, `
providers:
  gh:
    signature: { scheme: github, secrets: ["s3cret"] }
`)
	reg := prometheus.NewRegistry()
	h, err := gateway.NewServer(slog.New(slog.NewJSONHandler(&lockedLog{}, nil)), cfg, gateway.Deps{
		Publisher: storeAway{}, Audit: &review9fAudit{}, Registry: reg, Gatherer: reg,
		Ready: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	unavailable := map[string]string{"provider": "gh", "decision": "unavailable", "status": "503"}
	accepted := map[string]string{"provider": "gh", "decision": "accepted", "status": "200"}
	if _, ok := reviewZCounter(t, reg, "hookgate_gateway_requests_total", accepted); !ok {
		t.Fatal("setup: the accepted series is not exported at start either")
	}
	before, existed := reviewZCounter(t, reg, "hookgate_gateway_requests_total", unavailable)
	for i := range 3 { // a short outage, between two scrapes
		if c := review9fPost(h, fmt.Sprintf(`{"id":"o%d"}`, i), true); c != http.StatusServiceUnavailable {
			t.Fatalf("setup: answer %d, want 503", c)
		}
	}
	after, _ := reviewZCounter(t, reg, "hookgate_gateway_requests_total", unavailable)
	if !existed {
		t.Fatalf("scrape before the outage: no hookgate_gateway_requests_total%v series (accepted/duplicate are exported at 0); scrape after: %v. rate() over the two sees no increase: the README's \"unavailable rising\" alert stays silent for 3 answers 503", unavailable, after)
	}
	if after-before != 3 {
		t.Fatalf("unavailable moved by %v, want 3", after-before)
	}
}
