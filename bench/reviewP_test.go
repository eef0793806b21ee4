package bench

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// Load refuses a negative rate only after it started the OnWindow
// goroutine: the callback (the harness's cpu.mark and mon.mark) then runs
// after Load has returned its error, racing whatever the caller tears down.
func TestReviewPBadRateNoWindowCallback(t *testing.T) {
	var calls atomic.Int32
	_, err := Load(t.Context(), LoadOptions{
		Addr: "127.0.0.1:1", Conns: 1, Warmup: 10 * time.Millisecond, Duration: 10 * time.Millisecond, Rate: -1,
		OnWindow: func(bool) { calls.Add(1) },
	})
	if err == nil {
		t.Fatal("a negative rate was taken")
	}
	time.Sleep(100 * time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Fatalf("OnWindow called %d times after Load returned %q", n, err)
	}
}

// A rate that is not a finite positive number (or one so small that a
// slot's offset overflows time.Duration) is not refused: the slot time
// comes out in the past and the "paced" load runs closed loop.
func TestReviewPNonFiniteOrTinyRate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	defer srv.Close()
	for _, rate := range []float64{math.Inf(1), math.NaN(), 1e-10} {
		t.Run(strconv.FormatFloat(rate, 'g', -1, 64), func(t *testing.T) {
			res, err := Load(t.Context(), LoadOptions{
				Addr: strings.TrimPrefix(srv.URL, "http://"), Path: "/webhooks/x",
				Conns: 2, Duration: 200 * time.Millisecond, BodySize: 100, IDPrefix: "evt_rp", Rate: rate,
			})
			// Either refused, or paced: at 1e-10/s only worker 0's slot 0
			// (at the start) lies inside 200 ms.
			if err == nil && res.Sent > 1 {
				t.Fatalf("rate %g: sent %d requests in 200ms (closed loop), want an error or at most 1", rate, res.Sent)
			}
		})
	}
}

// reviewPNATS starts hookgate's embedded JetStream with its streams (and
// the apply consumer on WEBHOOKS), and returns a monitor on it.
func reviewPNATS(t *testing.T) (*e2eMonitor, js.JetStream) {
	t.Helper()
	env := jstest.Start(t, "")
	j := env.Conn.JS
	if _, err := j.CreateOrUpdateConsumer(t.Context(), jetstream.StreamWebhooks, js.ConsumerConfig{Durable: jetstream.DurableApply, AckPolicy: js.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	return &e2eMonitor{nc: env.Conn.NC, j: j}, j
}

// When one of the window's marks fails (mark drops the error), drain
// leaves WindowApplied and WindowLagEnd at 0, indistinguishable from a
// measured 0, and aggregate folds that 0 into the medians: with the
// default 2 rounds, one lost mark halves the applied rate in the window
// (and, with 3 rounds, a lost end mark in the round that fell behind
// hides its lag from the "largest lag of any round").
func TestReviewPLostMarkEntersMedian(t *testing.T) {
	m, j := reviewPNATS(t)
	ctx := t.Context()
	m.start()
	for i := range 50 {
		if _, err := j.Publish(ctx, "grants.g"+strconv.Itoa(i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	m.mark(true)
	for i := range 50 {
		if _, err := j.Publish(ctx, "grants.h"+strconv.Itoa(i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// The end mark's sample fails (here: the consumer briefly gone; in a
	// run: NATS too busy to answer within sample's 5 s).
	if err := j.DeleteConsumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply); err != nil {
		t.Fatal(err)
	}
	m.mark(false)
	if _, err := j.CreateOrUpdateConsumer(ctx, jetstream.StreamWebhooks, js.ConsumerConfig{Durable: jetstream.DurableApply, AckPolicy: js.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	lost := m.drain(ctx, 2*time.Second)
	if lost.WindowSeconds != 0 {
		t.Fatalf("the end mark's sample did not fail (window %.3fs measured): the test's premise is gone", lost.WindowSeconds)
	}
	lost.Offered = 1000
	good := &E2EResult{Offered: 1000, WindowSeconds: 1, WindowApplied: 1000, WindowLagEnd: 10, WindowLagMax: 10, Drained: true, AppliedRate: 900}
	cfgs := []Configuration{{Name: "sustained", EndToEnd: true, Pace: 0.5}}
	crs := aggregate(cfgs, []RoundResult{
		{Round: 1, Config: "sustained", RPS: 1000, Measured: 1, E2E: good, hist: &Histogram{}},
		{Round: 2, Config: "sustained", RPS: 1000, Measured: 1, E2E: lost, hist: &Histogram{}},
	})
	if got := crs[0].Paced.WindowApplied; got != 1000 {
		t.Fatalf("median applied in the window %.0f/s, want 1000 from the one round whose window was measured (the other's end mark failed: WindowApplied %.0f, WindowLagEnd %d, no sign it was not measured)",
			got, lost.WindowApplied, lost.WindowLagEnd)
	}
}

// omitempty on the window's lags drops the key exactly when the paced
// consumer kept up (lag 0), so latest.json cannot tell "kept up" from
// "not a paced run / not measured".
func TestReviewPZeroLagKeptInJSON(t *testing.T) {
	yes := true
	cr := ConfigResult{Name: "sustained", Rounds: 1, Paced: &PacedResult{Rounds: 1, Offered: 1000, WindowApplied: 1000}, Drained: &yes}
	b, err := json.Marshal(cr)
	if err != nil {
		t.Fatal(err)
	}
	e, err := json.Marshal(E2EResult{Offered: 1000, WindowSeconds: 1, WindowApplied: 1000, Drained: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"lag_at_window_end_max"`, `"lag_max_in_window"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("config JSON of a paced run with lag 0 lacks %s: %s", k, b)
		}
	}
	if !strings.Contains(string(e), `"lag_at_window_end"`) {
		t.Errorf("round JSON of a paced run with lag 0 lacks \"lag_at_window_end\": %s", e)
	}
}

// WriteSVG adds a row's height for each config with AppliedRate > 0 but
// draws the paced config's "applied in the window" bar whenever Offered >
// 0: a paced run whose consumer applied nothing gets a bar with no room,
// and the throughput panel's goal label runs into the latency title.
func TestReviewPSVGPacedRowHeight(t *testing.T) {
	no := false
	for _, applied := range []float64{500, 0} {
		r := &Report{Configs: []ConfigResult{
			{Name: "floor", Label: "floor", Rounds: 1, RPS: 2000, P99ms: 1, RatioRPS: 1, RatioP99: 1},
			{Name: "hmac", Label: "hmac", Rounds: 1, RPS: 2000, P99ms: 1, RatioRPS: 1, RatioP99: 1},
			{Name: "sustained", Label: "paced", Rounds: 1, RPS: 1000, P99ms: 1, AppliedRate: applied, Paced: &PacedResult{Rounds: 1, Offered: 1000, WindowApplied: applied}, Drained: &no},
		}}
		var sb strings.Builder
		if err := r.WriteSVG(&sb); err != nil {
			t.Fatal(err)
		}
		y := func(re string) float64 {
			m := regexp.MustCompile(re).FindStringSubmatch(sb.String())
			if m == nil {
				t.Fatalf("%s not in the SVG", re)
			}
			v, _ := strconv.ParseFloat(m[1], 64)
			return v
		}
		goal := y(`y="([0-9.]+)"[^>]*>goal 0\.9x floor<`)
		title := y(`y="([0-9.]+)"[^>]*>p99 latency`)
		if title-goal < 30 {
			t.Errorf("applied %.0f/s: the throughput panel's goal label (y %.0f) sits %.0f px above the latency title (y %.0f); %.0f with the row counted", applied, goal, title-goal, title, 40.0)
		}
	}
}
