package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func goalMet(r *Report, prefix string) (Goal, bool) {
	for _, g := range r.Goals {
		if strings.HasPrefix(g.Goal, prefix) {
			return g, true
		}
	}
	return Goal{}, false
}

// The redelivery goal is decided on throughput (re.RPS >= 0.97 hmac RPS),
// though the README's goal table, the table's footnote ("compare its
// CPU/req with the hmac row's, as the goal below does") and issue 6 all
// put it as CPU per request: a redelivery answered from memory skips the
// publish, so its row's rps rises with or without the gateway doing less
// work per request. Here the redeliveries cost 50% more CPU per request
// at the same rps and the goal says "yes"; the reverse case (less CPU,
// fewer rps on a noisier round) says "no".
func TestReviewXRedeliveryGoalDecidedOnRPSNotCPU(t *testing.T) {
	for _, tc := range []struct {
		name           string
		reRPS, reCPUus float64
		want           string
	}{
		{"costlier per request, same rps", 10000, 120, "no"},
		{"cheaper per request, fewer rps", 9000, 60, "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Configs: []ConfigResult{
				{Name: "floor", Rounds: 1, RPS: 11000, P99ms: 5, RatioRPS: 1, RatioP99: 1, ServerCPUus: 70},
				{Name: "hmac", Rounds: 1, RPS: 10000, P99ms: 6, RatioRPS: 0.91, RatioP99: 1.2, ServerCPUus: 80},
				{Name: "redeliver", Rounds: 1, RPS: tc.reRPS, P99ms: 6, ServerCPUus: tc.reCPUus},
			}}
			r.goals()
			g, ok := goalMet(r, "redeliveries cost no more")
			if !ok {
				t.Fatalf("no redelivery goal in %+v", r.Goals)
			}
			if g.Met != tc.want {
				t.Errorf("redeliveries at %.0f µs/req vs %.0f without: goal %q (%s), want %q", tc.reCPUus, 80.0, g.Met, g.Measured, tc.want)
			}
		})
	}
}

// The end-to-end goals ("consumer applies >= 0.5x", "lag returns to
// zero") use yesNo, not verdict: a configuration with errors still
// decides them, against the README's "a configuration with errors decides
// no goal". With errors in hmac, AppliedVsPeakGw is taken against an rps
// that counts only the 200s (a smaller denominator), so the ratio is
// inflated; with errors in e2e, the stored (and applied) events are fewer.
func TestReviewXEndToEndGoalsIgnoreErrors(t *testing.T) {
	drained := true
	for _, tc := range []struct {
		name             string
		hmacErr, e2eErrs uint64
	}{
		{"errors in e2e", 0, 5000},
		{"errors in hmac (the ratio's denominator)", 5000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Configs: []ConfigResult{
				{Name: "floor", Rounds: 1, RPS: 11000, P99ms: 5, RatioRPS: 1, RatioP99: 1},
				{Name: "hmac", Rounds: 1, RPS: 8000, P99ms: 6, RatioRPS: 0.73, RatioP99: 1.2, Errors: tc.hmacErr},
				{Name: "e2e", Rounds: 1, RPS: 7000, Errors: tc.e2eErrs, Peak: "hmac",
					AppliedRate: 4500, AppliedVsPeakGw: 0.56, AppliedPeak: 6000, DrainSeconds: 2, Drained: &drained},
			}}
			r.goals()
			prefixes := []string{"consumer applies >= 0.5x the gateway's peak rate, counted"}
			if tc.e2eErrs > 0 { // the lag goal is the e2e row's alone
				prefixes = append(prefixes, "lag returns to zero")
			}
			for _, prefix := range prefixes {
				g, ok := goalMet(r, prefix)
				if !ok {
					t.Fatalf("no goal %q in %+v", prefix, r.Goals)
				}
				if !strings.HasPrefix(g.Met, "n/a") {
					t.Errorf("goal %q decided %q with errors (hmac %d, e2e %d), want n/a", prefix, g.Met, tc.hmacErr, tc.e2eErrs)
				}
			}
		})
	}
}

// `-only e2e` runs no hmac configuration (Run adds hmac only for
// "sustained"), so the round's peak is 0, AppliedVsPeakGw stays 0 and the
// consumer goal is decided "no" on a figure never measured ("0.00x ...
// vs 0 rps; best 1 s ... = +Infx").
func TestReviewXEndToEndGoalWithoutHmacRound(t *testing.T) {
	o := Options{Only: []string{"e2e"}}
	all := Configurations(0.5, 0.5)
	var cfgs []Configuration
	for _, c := range all { // Run's selection, verbatim
		needed := c.Name == "floor" || c.Name == "hmac" && contains(o.Only, "sustained")
		if len(o.Only) == 0 || contains(o.Only, c.Name) || needed {
			cfgs = append(cfgs, c)
		}
	}
	drained := true
	// What Run records when rps["hmac"] is 0: AppliedVsPeakGw left at 0.
	rounds := []RoundResult{
		{Round: 1, Config: "floor", RPS: 11000, hist: &Histogram{}},
		{Round: 1, Config: "e2e", RPS: 7000, hist: &Histogram{},
			E2E: &E2EResult{AppliedRate: 6000, AppliedPeak: 8000, Drained: drained, DrainSeconds: 1}},
	}
	r := &Report{Configs: aggregate(cfgs, rounds)}
	r.goals()
	g, ok := goalMet(r, "consumer applies >= 0.5x the gateway's peak rate, counted")
	if ok && (g.Met == "yes" || g.Met == "no") {
		t.Errorf("no hmac round was run, yet the consumer goal is decided %q on %q", g.Met, g.Measured)
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// The paced ("open loop") load times each request from the moment it was
// written, not from its slot's due time: a slot that fell due while every
// connection waited goes out late and is timed as if nothing had waited
// (coordinated omission). Here one connection is paced at 1000/s and the
// server holds the first request 300 ms: slots 1..100 fall due in the
// first 100 ms and none can be sent before 300 ms, so at least 100
// requests were answered >= 200 ms after they were due. The histogram
// (which gives the paced rows' p50/p99 and p99/floor) has only the one
// held request there.
func TestReviewXPacedLatencyIgnoresSchedule(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1) == 1 {
			time.Sleep(300 * time.Millisecond)
		}
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	defer srv.Close()
	res, err := Load(t.Context(), LoadOptions{
		Addr: strings.TrimPrefix(srv.URL, "http://"), Path: "/webhooks/x",
		Conns: 1, Duration: 1500 * time.Millisecond, BodySize: 200, IDPrefix: "evt_x", Rate: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Fatalf("errors %d: %s", res.Errors, res.FirstError)
	}
	const late = 200 * time.Millisecond
	var slow uint64
	for i, c := range res.Latency.counts {
		if lo, _ := bucketRange(i); c > 0 && time.Duration(lo) >= late {
			slow += c
		}
	}
	if slow < 100 {
		t.Errorf("%d of %d measured requests timed >= %s; at least 100 were answered that long after their slot fell due (p99 %s)",
			slow, res.Measured, late, res.Latency.Quantile(0.99))
	}
}

// The profile is fetched with ?seconds=ROUND(-profile-duration) while the
// load's window (the per-request divisor, Measured) is the duration
// itself: -profile-duration 2.5s profiles 3 s of CPU and divides it by
// 2.5 s of requests, 20% too much CPU per request (1.4s: 1 s, 29% too
// little). The profile's span must be the window's, or such a duration
// refused (net/http/pprof takes whole seconds only).
func TestReviewXProfileSpanMatchesWindow(t *testing.T) {
	var asked atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.RawQuery)
	}))
	defer srv.Close()
	for _, d := range []time.Duration{2500 * time.Millisecond, 1400 * time.Millisecond} {
		if err := fetchProfile(strings.TrimPrefix(srv.URL, "http://"), d, filepath.Join(t.TempDir(), "p.pprof")); err != nil {
			continue // refused: no mismatched figure
		}
		q, _ := url.ParseQuery(asked.Load().(string))
		if got := q.Get("seconds"); got != "" {
			if span, err := time.ParseDuration(got + "s"); err != nil || span != d {
				t.Errorf("load window %s, profile asked for seconds=%s", d, got)
			}
		}
	}
}

// The throughput goal's line names issue 6's settings ("32 conns, 1 KB")
// whatever the run used: `-conns 4 -body 16384` prints that goal,
// decided, under the issue's settings. The goal holds at 32 connections
// and 1 KB bodies; a run at other settings should say what it measured
// at, or not decide the goal.
func TestReviewXThroughputGoalClaimsIssueSettings(t *testing.T) {
	r := &Report{
		Settings: Settings{Conns: 4, BodyBytes: 16384},
		Configs: []ConfigResult{
			{Name: "floor", Rounds: 1, RPS: 5000, P99ms: 5, RatioRPS: 1, RatioP99: 1},
			{Name: "hmac", Rounds: 1, RPS: 4800, P99ms: 6, RatioRPS: 0.96, RatioP99: 1.2},
		},
	}
	r.goals()
	g, ok := goalMet(r, "gateway throughput >= 0.9x floor")
	if !ok {
		t.Fatalf("no throughput goal in %+v", r.Goals)
	}
	if strings.Contains(g.Goal, "32 conns, 1 KB") && (g.Met == "yes" || g.Met == "no") {
		t.Errorf("run at 4 conns, 16384 B bodies reported as %q: %q", g.Goal, g.Met)
	}
}

// The paced goal reads "consumer applies >= 0.5x the gateway's peak
// rate" and prints AppliedVsPeakGw, but keptUp decides it with two 2%
// allowances stacked (answered >= 0.98x offered, applied >= 0.98x
// answered): a consumer applying 0.48x the peak is printed "0.48x" and
// marked met.
func TestReviewXPacedGoalMetBelowHalf(t *testing.T) {
	cfgs := []Configuration{{Name: "floor", Floor: true}, {Name: "hmac"}, {Name: "sustained", EndToEnd: true, Pace: 0.5}}
	const peak = 10000.0
	offered := 0.5 * peak
	answered := 0.98 * offered
	applied := 0.98 * answered
	rounds := []RoundResult{
		{Round: 1, Config: "floor", RPS: 11000, hist: &Histogram{}},
		{Round: 1, Config: "hmac", RPS: peak, hist: &Histogram{}},
		{Round: 1, Config: "sustained", RPS: answered, hist: &Histogram{},
			E2E: &E2EResult{Offered: offered, WindowSeconds: 10, WindowApplied: applied, AppliedVsPeakGw: applied / peak, Drained: true}},
	}
	r := &Report{Configs: aggregate(cfgs, rounds)}
	r.goals()
	g, ok := goalMet(r, "consumer applies >= 0.5x the gateway's peak rate, keeping up")
	if !ok {
		t.Fatalf("no paced goal in %+v", r.Goals)
	}
	if g.Met == "yes" && applied/peak < 0.5 {
		t.Errorf("goal %q met at %.4fx: %q", g.Goal, applied/peak, g.Measured)
	}
}
