package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// RoundResult is one configuration measured once.
type RoundResult struct {
	Round      int            `json:"round"`
	Config     string         `json:"config"`
	RPS        float64        `json:"rps"`
	P50ms      float64        `json:"p50_ms"`
	P99ms      float64        `json:"p99_ms"`
	Measured   uint64         `json:"measured"`
	Sent       uint64         `json:"sent"`
	Accepted   uint64         `json:"accepted"`
	Duplicates uint64         `json:"duplicates"`
	Errors     uint64         `json:"errors"`
	Statuses   map[int]uint64 `json:"statuses,omitempty"`
	FirstError string         `json:"first_error,omitempty"`
	RSSPeak    int64          `json:"rss_peak_bytes"`
	RSSEnd     int64          `json:"rss_end_bytes"`
	// ServerCPUus and ClientCPUus are CPU microseconds per measured
	// request, of the server process and of the harness (load generator).
	ServerCPUus float64 `json:"server_cpu_us_per_req"`
	ClientCPUus float64 `json:"client_cpu_us_per_req"`
	// OtherCPUs is how many CPUs processes other than the harness and
	// its server kept busy during the window: noise when above ~0.1.
	OtherCPUs float64    `json:"other_cpus"`
	E2E       *E2EResult `json:"e2e,omitempty"`
	hist      *Histogram
}

// E2EResult is what the end-to-end round measured about the consumer.
type E2EResult struct {
	Stored        uint64  `json:"stored"`  // WEBHOOKS messages
	Applied       uint64  `json:"applied"` // GRANTS messages
	LoadSeconds   float64 `json:"load_seconds"`
	DrainSeconds  float64 `json:"drain_seconds"` // load end to lag 0
	Drained       bool    `json:"drained"`
	AppliedRate   float64 `json:"applied_per_s"` // Applied / (load start to lag 0)
	AppliedDuring float64 `json:"applied_per_s_during_load"`
	AppliedPeak   float64 `json:"applied_per_s_peak_1s"`
	LagAtLoadEnd  uint64  `json:"lag_at_load_end"`
	// Stall, when the lag stood still (and above 0) for stallAfter during
	// the drain: the consumer's state then, to tell undelivered events
	// (a pull that stopped) from delivered ones never acknowledged.
	Stall string `json:"stall,omitempty"`
	// WriteFailures is how many writes the floor's consumer tried again
	// in place (what it reported on stopping): its rates include those
	// pauses.
	WriteFailures uint64  `json:"write_failures,omitempty"`
	Timeline      []Point `json:"timeline"`
	// AppliedVsPeakGw is AppliedRate / the round's hmac rps; for a paced
	// run, WindowApplied / hmac rps.
	AppliedVsPeakGw float64 `json:"applied_vs_gateway_peak"`
	// Offered is a paced run's rate (0: not paced): the schedule's
	// (Scheduled), or, when the load generator sent less than 98% of it in
	// the window (every connection waiting for an answer as slots fell
	// due), what it sent (review X: the schedule's rate was reported as
	// offered whatever went out).
	Offered   float64 `json:"offered_per_s,omitempty"`
	Scheduled float64 `json:"scheduled_per_s,omitempty"`
	// The measured window as the monitor saw it: its length (0: a sample
	// at an edge failed, so the rest is not measured), the applied rate
	// inside it, and the lag at its end and at most within it.
	WindowSeconds float64 `json:"window_s"`
	WindowApplied float64 `json:"applied_per_s_in_window"`
	WindowLagEnd  uint64  `json:"lag_at_window_end"`
	WindowLagMax  uint64  `json:"lag_max_in_window"`
}

// PacedResult is a paced end-to-end configuration over the rounds whose
// window was measured: medians of the offered and the in-window applied
// rates, the largest lags of any of those rounds.
type PacedResult struct {
	Rounds        int     `json:"rounds_measured"`
	Offered       float64 `json:"offered_per_s"`
	Scheduled     float64 `json:"scheduled_per_s"`
	WindowApplied float64 `json:"applied_per_s_in_window"`
	LagEnd        uint64  `json:"lag_at_window_end_max"`
	LagMax        uint64  `json:"lag_max_in_window"`
}

// Point is one sample of the end-to-end timeline.
type Point struct {
	T       float64 `json:"t"` // seconds since load start
	Applied uint64  `json:"applied"`
	Lag     uint64  `json:"lag"`
}

// ConfigResult is a configuration over all rounds.
type ConfigResult struct {
	Name        string  `json:"name"`
	Label       string  `json:"label"`
	Rounds      int     `json:"rounds"`
	RPS         float64 `json:"rps"` // median of rounds
	RPSMin      float64 `json:"rps_min"`
	RPSMax      float64 `json:"rps_max"`
	P50ms       float64 `json:"p50_ms"` // over every measured request of every round
	P99ms       float64 `json:"p99_ms"`
	P999ms      float64 `json:"p999_ms"`
	RatioRPS    float64 `json:"rps_vs_floor"` // median of per-round rps / floor rps of the same round
	RatioP99    float64 `json:"p99_vs_floor"`
	RSSMax      int64   `json:"rss_max_bytes"`
	ServerCPUus float64 `json:"server_cpu_us_per_req"`
	ClientCPUus float64 `json:"client_cpu_us_per_req"`
	OtherCPUs   float64 `json:"other_cpus"` // median over rounds
	Errors      uint64  `json:"errors"`
	Sent        uint64  `json:"sent"`
	Duplicates  uint64  `json:"duplicates"`
	// End to end only: medians over rounds.
	// Peak names the configuration whose rate is this one's gateway's
	// peak (hmac for hookgate, floor for the floor's end to end).
	Peak            string  `json:"peak,omitempty"`
	AppliedRate     float64 `json:"applied_per_s,omitempty"`
	AppliedVsPeakGw float64 `json:"applied_vs_gateway_peak,omitempty"`
	// AppliedPeak is the best 1 s apply rate (median over rounds): the
	// consumer's pace once the burst is over and it has the machine.
	AppliedPeak  float64 `json:"applied_per_s_peak_1s,omitempty"`
	DrainSeconds float64 `json:"drain_seconds_max,omitempty"`
	Drained      *bool   `json:"drained,omitempty"`
	// Paced end to end only (nil otherwise).
	Paced *PacedResult `json:"paced,omitempty"`
	hist  *Histogram
}

// Settings are the knobs a report was made with.
type Settings struct {
	Conns        int     `json:"conns"`
	BodyBytes    int     `json:"body_bytes"`
	WarmupS      float64 `json:"warmup_s"`
	DurationS    float64 `json:"duration_s"`
	Rounds       int     `json:"rounds"`
	Redeliveries float64 `json:"redeliveries"`
	Keys         int     `json:"keys"`
}

// Report is everything one harness run measured.
type Report struct {
	Time     time.Time      `json:"time"`
	Command  string         `json:"command"`
	Machine  string         `json:"machine"`
	Settings Settings       `json:"settings"`
	Configs  []ConfigResult `json:"configs"`
	Rounds   []RoundResult  `json:"rounds"`
	Keys     *KeysResult    `json:"keys,omitempty"`
	Profile  *ProfileResult `json:"profile,omitempty"`
	Goals    []Goal         `json:"goals"`
	Elapsed  float64        `json:"elapsed_s"`
}

// ProfileResult summarises the CPU profile of the gateway under load.
type ProfileResult struct {
	Config     string      `json:"config"`
	RPS        float64     `json:"rps"`
	Seconds    float64     `json:"seconds"`
	File       string      `json:"file"`
	FlameSVG   string      `json:"flame_svg"`
	GraphSVG   string      `json:"graph_svg,omitempty"`
	Components []FuncShare `json:"components"`
	TopCum     []FuncShare `json:"top_cum"`
	TopFlat    []FuncShare `json:"top_flat"`
	Shares     []FuncShare `json:"shares"` // cumulative shares of chosen areas
	// TotalUS is the gateway process's profiled CPU per request; the
	// floor's is in Floor.
	TotalUS    float64         `json:"total_us_per_req"`
	PerRequest []ComponentCost `json:"per_request_us"`
	Floor      *ProfileSide    `json:"floor,omitempty"`
}

// ProfileSide is the floor's profile, taken the same way.
type ProfileSide struct {
	RPS        float64     `json:"rps"`
	File       string      `json:"file"`
	FlameSVG   string      `json:"flame_svg"`
	Components []FuncShare `json:"components"`
	TotalUS    float64     `json:"total_us_per_req"`
}

// ComponentCost is one component's CPU per request in both profiles.
type ComponentCost struct {
	Name      string  `json:"component"`
	FloorUS   float64 `json:"floor_us"`
	GatewayUS float64 `json:"gateway_us"`
}

// Goal is one of issue 6's goals with its measured figure.
type Goal struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      string `json:"met"` // yes, no, n/a
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// aggregate folds the rounds into one result per configuration, in the
// order of cfgs.
func aggregate(cfgs []Configuration, rounds []RoundResult) []ConfigResult {
	floorRPS := map[int]float64{}
	for _, r := range rounds {
		if r.Config == "floor" {
			floorRPS[r.Round] = r.RPS
		}
	}
	var out []ConfigResult
	for _, c := range cfgs {
		cr := ConfigResult{Name: c.Name, Label: c.Label, hist: &Histogram{}}
		if c.EndToEnd {
			cr.Peak = c.Peak()
		}
		var rps, ratios, srv, cli, other, applied, appliedVs, peaks, offered, inWindow, scheduled []float64
		for _, r := range rounds {
			if r.Config != c.Name {
				continue
			}
			cr.Rounds++
			rps = append(rps, r.RPS)
			if f := floorRPS[r.Round]; f > 0 {
				ratios = append(ratios, r.RPS/f)
			}
			if r.hist != nil {
				cr.hist.Merge(r.hist)
			}
			cr.RSSMax = max(cr.RSSMax, r.RSSPeak)
			srv = append(srv, r.ServerCPUus)
			cli = append(cli, r.ClientCPUus)
			other = append(other, r.OtherCPUs)
			cr.Errors += r.Errors
			cr.Sent += r.Sent
			cr.Duplicates += r.Duplicates
			if r.E2E != nil {
				applied = append(applied, r.E2E.AppliedRate)
				peaks = append(peaks, r.E2E.AppliedPeak)
				if r.E2E.Offered == 0 || r.E2E.WindowSeconds > 0 {
					// A paced round's ratio is its window's.
					appliedVs = append(appliedVs, r.E2E.AppliedVsPeakGw)
				}
				cr.DrainSeconds = max(cr.DrainSeconds, r.E2E.DrainSeconds)
				if e := r.E2E; e.Offered > 0 {
					if cr.Paced == nil {
						cr.Paced = &PacedResult{}
					}
					if e.WindowSeconds > 0 {
						cr.Paced.Rounds++
						offered, inWindow = append(offered, e.Offered), append(inWindow, e.WindowApplied)
						scheduled = append(scheduled, cmp.Or(e.Scheduled, e.Offered))
						cr.Paced.LagEnd = max(cr.Paced.LagEnd, e.WindowLagEnd)
						cr.Paced.LagMax = max(cr.Paced.LagMax, e.WindowLagMax)
					}
				}
				d := r.E2E.Drained && (cr.Drained == nil || *cr.Drained)
				cr.Drained = &d
			}
		}
		if cr.Rounds == 0 {
			continue
		}
		cr.RPS, cr.RatioRPS = median(rps), median(ratios)
		cr.RPSMin, cr.RPSMax = slicesMin(rps), slicesMax(rps)
		cr.P50ms, cr.P99ms, cr.P999ms = ms(cr.hist.Quantile(0.5)), ms(cr.hist.Quantile(0.99)), ms(cr.hist.Quantile(0.999))
		cr.ServerCPUus, cr.ClientCPUus, cr.OtherCPUs = median(srv), median(cli), median(other)
		cr.AppliedRate, cr.AppliedVsPeakGw, cr.AppliedPeak = median(applied), median(appliedVs), median(peaks)
		if cr.Paced != nil {
			cr.Paced.Offered, cr.Paced.WindowApplied, cr.Paced.Scheduled = median(offered), median(inWindow), median(scheduled)
		}
		out = append(out, cr)
	}
	var floorP99 float64
	for _, c := range out {
		if c.Name == "floor" {
			floorP99 = c.P99ms
		}
	}
	for i := range out {
		if floorP99 > 0 {
			out[i].RatioP99 = out[i].P99ms / floorP99
		}
	}
	return out
}

func slicesMin(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func slicesMax(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// WriteTable prints the report's table and the key, restart, profile and
// goal figures.
func (r *Report) WriteTable(w io.Writer) {
	if len(r.Configs) > 0 {
		s := r.Settings
		fmt.Fprintf(w, "\nhookgate-bench: %d conns, %d B bodies, %s warm-up + %s measured per round, %d rounds (A/B/A/B), %s\n\n",
			s.Conns, s.BodyBytes, dur(s.WarmupS), dur(s.DurationS), s.Rounds, r.Machine)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "configuration\t rps\t p50\t p99\t rps/floor\t p99/floor\t RSS max\t cpu/req\t errors\t noise\t")
		for _, c := range r.Configs {
			fmt.Fprintf(tw, "%s\t %.0f\t %.2fms\t %.2fms\t %.2fx\t %.2fx\t %s\t %.0fµs\t %d\t %.2f\t\n",
				c.Label, c.RPS, c.P50ms, c.P99ms, c.RatioRPS, c.RatioP99, mib(c.RSSMax), c.ServerCPUus, c.Errors, c.OtherCPUs)
		}
		tw.Flush()
		fmt.Fprintln(w, "\nrps: median over rounds; p50/p99: over all measured requests; rps/floor: median of per-round ratios;")
		fmt.Fprintln(w, "RSS max: largest VmHWM of the server process; cpu/req: server process CPU per measured request;")
		fmt.Fprintln(w, "noise: CPUs kept busy by other processes during the window (median); above ~0.1 the machine was not quiet.")
		if r.config("redeliver").Rounds > 0 {
			fmt.Fprintln(w, "redeliveries: that row's ratios are against a floor without redeliveries, which would gain from them too (a duplicate stores")
			fmt.Fprintln(w, "nothing): compare its CPU/req with the hmac row's, as the goal below does.")
		}
	}
	for _, c := range r.Configs {
		if p := c.Paced; c.Drained != nil && p != nil && p.Rounds == 0 {
			fmt.Fprintf(w, "\n%s: the measured window's edges could not be sampled in any round; lag back to 0: %t\n", c.Label, *c.Drained)
		} else if c.Drained != nil && p != nil {
			fmt.Fprintf(w, "\n%s: %.0f requests/s offered, the gateway answered %.0f/s, the consumer applied %.0f/s in the measured window (%.2fx the %s gateway's %.0f rps); lag at the window's end %d events, at most %d in it; back to 0: %t, %.1fs after the load (worst round)\n",
				c.Label, p.Offered, c.RPS, p.WindowApplied, c.AppliedVsPeakGw, c.Peak, r.config(c.Peak).RPS, p.LagEnd, p.LagMax, *c.Drained, c.DrainSeconds)
		} else if c.Drained != nil {
			fmt.Fprintf(w, "\nend to end: consumer applied %.0f events/s (%.2fx the hmac gateway's %0.f rps) from the burst's start until the lag was 0, at best %.0f/s in 1 s; lag back to 0: %t, %.1fs after the burst (worst round)\n",
				c.AppliedRate, c.AppliedVsPeakGw, r.config("hmac").RPS, c.AppliedPeak, *c.Drained, c.DrainSeconds)
		}
	}
	if k := r.Keys; k != nil {
		f := k.Fill
		fmt.Fprintf(w, "\ntracked keys: %d ids of %d B (bodies %d B) in WEBHOOKS over a 96h horizon, held by the gateway's key index, WEBHOOKS's own duplicate window 2m holding the %d ids a steady rate leaves in it: RSS +%s = %.0f B/key (Go heap %.0f B/key); disk %.0f B/key; fill %.0f msg/s; first index open (every key read back from WEBHOOKS) %.1fs, %.0f keys/s\n",
			f.N, f.IDBytes, f.BodyBytes, f.WindowN, mib(f.RSSAfter-f.RSSBase), f.BytesPerKey, f.HeapPerKey, float64(f.DiskBytes)/float64(max(f.N, 1)), f.FillRate, f.IndexReadSeconds, f.IndexReadRate)
		fmt.Fprintf(w, "GRANTS, 2m window (dedup.window; sequenced publishes): the %d ids a steady rate leaves in it (1/2880 of the tracked keys): RSS +%.1f B per tracked key (Go heap %.1f B); both %.0f B/key\n", f.GrantsN, f.GrantsPerKey, f.GrantsHeap, f.BytesPerKey+f.GrantsPerKey)
		if f.AppliedN > 0 {
			fmt.Fprintf(w, "APPLIED-like KV, %d keys (one subject each; providers without GRANTS as their memory): RSS +%.0f B/key (Go heap %.0f B/key)\n", f.AppliedN, f.AppliedPerKey, f.AppliedHeap)
		}
		for _, rs := range k.Restarts {
			both := ", key index and windows"
			if f.AppliedN > 0 {
				both += " + APPLIED entry"
			}
			fmt.Fprintf(w, "restart after %s: server up %.2fs, JetStream answers %.2fs, key index ready %.2fs, old id reported duplicate %.2fs (process spawn to ready %.2fs); settled RSS then %.0f B per event%s\n",
				rs.After, rs.ServerReady, rs.JetStreamReady, rs.IndexReady, rs.DuplicateOK, rs.ProcessReady, rs.BytesPerKey, both)
		}
	}
	if p := r.Profile; p != nil {
		fmt.Fprintf(w, "\nCPU profile of the %s gateway (in-process copy of serve's wiring, %.0f rps while profiled, %.0fs): %s\n", p.Config, p.RPS, p.Seconds, p.FlameSVG)
		if p.Floor != nil {
			fmt.Fprintf(w, "and of the floor (%.0f rps): %s\n", p.Floor.RPS, p.Floor.FlameSVG)
			fmt.Fprintln(w, "  CPU µs per request by component (each sample charged to its innermost known frame):")
			fmt.Fprintf(w, "  %8s %8s %8s  %s\n", "floor", "gateway", "extra", "component")
			for _, c := range p.PerRequest {
				fmt.Fprintf(w, "  %8.1f %8.1f %+8.1f  %s\n", c.FloorUS, c.GatewayUS, c.GatewayUS-c.FloorUS, c.Name)
			}
			fmt.Fprintf(w, "  %8.1f %8.1f %+8.1f  total\n", p.Floor.TotalUS, p.TotalUS, p.TotalUS-p.Floor.TotalUS)
		}
		fmt.Fprintln(w, "  gateway, by component:")
		for _, c := range p.Components {
			fmt.Fprintf(w, "  %5.1f%%  %s\n", c.Flat, c.Name)
		}
		fmt.Fprintln(w, "  cumulative (samples with the frame anywhere on the stack):")
		for _, c := range p.Shares {
			fmt.Fprintf(w, "  %5.1f%%  %s\n", c.Cum, c.Name)
		}
	}
	if len(r.Goals) > 0 {
		fmt.Fprintln(w, "\ngoals (issue 6):")
		for _, g := range r.Goals {
			fmt.Fprintf(w, "  [%s] %s: %s\n", g.Met, g.Goal, g.Measured)
		}
	}
}

func dur(s float64) string { return time.Duration(s * float64(time.Second)).String() }

func (r *Report) config(name string) ConfigResult {
	for _, c := range r.Configs {
		if c.Name == name {
			return c
		}
	}
	return ConfigResult{}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// goals fills r.Goals from the figures.
func (r *Report) goals() {
	floor, hm := r.config("floor"), r.config("hmac")
	add := func(goal, measured, met string) { r.Goals = append(r.Goals, Goal{goal, measured, met}) }
	// A run with errors decides nothing: its rates count only 200s.
	verdict := func(ok bool, cs ...ConfigResult) string {
		for _, c := range cs {
			if c.Errors > 0 {
				return fmt.Sprintf("n/a (%d errors in %s)", c.Errors, c.Name)
			}
		}
		return yesNo(ok)
	}
	if floor.Rounds > 0 && hm.Rounds > 0 {
		// The goal is at issue 6's settings; a run at others says what it
		// measured at and decides nothing (review X: the label claimed 32
		// conns, 1 KB whatever the run used). Settings not recorded (0):
		// taken as the defaults.
		at, atGoal := "32 conns, 1 KB", true
		if st := r.Settings; st.Conns != 0 && (st.Conns != 32 || st.BodyBytes != 1024) {
			at, atGoal = fmt.Sprintf("%d conns, %d B bodies; the goal is at 32 conns, 1 KB", st.Conns, st.BodyBytes), false
		}
		met := verdict(hm.RatioRPS >= 0.9, floor, hm)
		if !atGoal {
			met = "n/a (not the goal's settings)"
		}
		add("gateway throughput >= 0.9x floor ("+at+")", fmt.Sprintf("%.2fx (%.0f vs %.0f rps)", hm.RatioRPS, hm.RPS, floor.RPS), met)
		add("gateway p99 <= 2x floor p99", fmt.Sprintf("%.2fx (%.2f ms vs %.2f ms)", hm.RatioP99, hm.P99ms, floor.P99ms), verdict(hm.RatioP99 <= 2, floor, hm))
	}
	if re := r.config("redeliver"); re.Rounds > 0 && hm.Rounds > 0 {
		// Cost is CPU per request, as the goal says (review X: it was
		// decided on rps, which a redelivery answered from memory raises
		// whatever the gateway spends).
		met := verdict(re.ServerCPUus <= hm.ServerCPUus, re, hm)
		if re.ServerCPUus <= 0 || hm.ServerCPUus <= 0 {
			met = "n/a (CPU per request not measured)"
		}
		add("redeliveries cost no more than new events (CPU per request)", fmt.Sprintf("%.0f µs CPU/req with redeliveries vs %.0f µs/req without (%.0f vs %.0f rps)",
			re.ServerCPUus, hm.ServerCPUus, re.RPS, hm.RPS), met)
	}
	if e := r.config("e2e"); e.Rounds > 0 && e.Drained != nil {
		const goal = "consumer applies >= 0.5x the gateway's peak rate, counted from a flat-out burst's start until the lag is 0 (the gateway takes all it can of the shared CPUs)"
		if hm.Rounds == 0 || hm.RPS <= 0 {
			// -only e2e: no peak to compare with (review X: decided "no"
			// on a ratio against 0 rps).
			add(goal, fmt.Sprintf("%.0f applied/s; no hmac round to compare with (run -only hmac,e2e)", e.AppliedRate), "n/a (no hmac round)")
		} else {
			add(goal, fmt.Sprintf("%.2fx (%.0f applied/s vs %.0f rps; best 1 s: %.0f/s = %.2fx)", e.AppliedVsPeakGw, e.AppliedRate, hm.RPS, e.AppliedPeak, e.AppliedPeak/hm.RPS),
				verdict(e.AppliedVsPeakGw >= 0.5, e, hm))
		}
		add("lag returns to zero after a burst", fmt.Sprintf("%t, within %.1fs", *e.Drained, e.DrainSeconds), verdict(*e.Drained, e))
	}
	paced := func(goal string, c, peak ConfigResult) {
		if c.Rounds == 0 || c.Drained == nil || c.Paced == nil || peak.RPS <= 0 {
			return
		}
		if p := c.Paced; p.Rounds == 0 {
			add(goal, "not measured: the window's edges could not be sampled", "n/a")
		} else {
			met := verdict(keptUp(c, peak.RPS), c, peak)
			if p.Scheduled > 0 && p.Offered < p.Scheduled {
				// The load generator did not keep its schedule: what the
				// gateway and consumer would do at the pace is not shown.
				met = fmt.Sprintf("n/a (the load generator sent %.0f/s of the %.0f/s scheduled)", p.Offered, p.Scheduled)
			}
			add(goal, fmt.Sprintf("%.2fx (%.0f applied/s in the window; offered %.0f/s = %.2fx the %s gateway's %.0f rps, answered %.0f/s; lag at the window's end %d, at most %d)",
				c.AppliedVsPeakGw, p.WindowApplied, p.Offered, p.Offered/peak.RPS, peak.Name, peak.RPS, c.RPS, p.LagEnd, p.LagMax),
				met)
		}
	}
	paced("consumer applies >= 0.5x the gateway's peak rate, keeping up with a load paced at it (gateway and consumer on the same CPUs)", r.config("sustained"), hm)
	// Not a goal: the same question asked of the least pipeline, which
	// tells whether hookgate's answer is its own or the machine's.
	paced("reference, not a goal: the floor's least consumer (watermark compare-and-set + publish + ack) applies >= 0.5x the floor's peak, keeping up with a load paced at it", r.config("floor-sustained"), floor)
	if k := r.Keys; k != nil {
		total := k.Fill.BytesPerKey + k.Fill.GrantsPerKey
		add(fmt.Sprintf("memory per tracked key at %d keys <= 200 B", k.Fill.N), fmt.Sprintf("%.0f B/key RSS (key index and WEBHOOKS's 2 m window %.0f + GRANTS's 2 m window %.1f at a steady rate)", total, k.Fill.BytesPerKey, k.Fill.GrantsPerKey), yesNo(total <= 200))
		for _, rs := range k.Restarts {
			met := yesNo(rs.DuplicateOK <= 5)
			if k.Fill.N < 10_000_000 {
				met += " (goal is at 10M keys)"
			}
			add(fmt.Sprintf("restart-to-ready after %s at %d keys <= 5 s", rs.After, k.Fill.N), fmt.Sprintf("%.2fs", rs.DuplicateOK), met)
		}
	}
}

// keptUp reports whether a paced end-to-end run (the median round) shows
// a consumer keeping up at half the gateway's peak rate or more: the load
// was paced at it, the gateway answered it, the consumer applied what the
// gateway took within the window (2% for the events in flight at its
// edges, which the samples catch at slightly different moments), and was
// less than a second of the load behind at the window's end, and the lag
// returned to 0 afterwards. Halving is exact in floating point, so the
// median of rates paced at 0.5x is exactly half the median hmac rate.
//
// The goal's own figure decides too: the applied rate is at least half the
// peak (WindowApplied >= 0.5 peak), so a consumer applying 0.48x is never
// "yes" under a ">= 0.5x" line, as the two 2% allowances stacked let it be
// (review X). A consumer that keeps up exactly may so read "no" by the
// window's edges: the goal errs on the strict side.
func keptUp(c ConfigResult, peak float64) bool {
	p := c.Paced
	return p != nil && p.Rounds > 0 && c.Drained != nil && *c.Drained &&
		p.Offered >= 0.5*peak && c.RPS >= 0.98*p.Offered && p.WindowApplied >= 0.98*c.RPS && float64(p.LagEnd) <= p.Offered &&
		p.WindowApplied >= 0.5*peak
}

// WriteJSON writes the report as indented JSON to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteSVG draws throughput and p99 per configuration as two bar charts,
// with the floor and the goals (0.9x floor rps, 2x floor p99) as lines.
func (r *Report) WriteSVG(w io.Writer) error {
	const (
		width  = 960.0
		labelW = 300.0
		barH   = 22.0
		gap    = 8.0
		right  = 150.0
	)
	type bar struct {
		label string
		v     float64
		text  string
		color string
	}
	// consumerBar is the row under an end-to-end configuration: what its
	// consumer applied.
	consumerBar := func(c ConfigResult) (bar, bool) {
		if p := c.Paced; p != nil {
			return bar{"  consumer applied in the window", p.WindowApplied, fmt.Sprintf("%.0f/s  %.2fx gw", p.WindowApplied, c.AppliedVsPeakGw), "#27ae60"}, p.Rounds > 0
		}
		return bar{"  consumer applied (GRANTS)", c.AppliedRate, fmt.Sprintf("%.0f/s  %.2fx gw", c.AppliedRate, c.AppliedVsPeakGw), "#27ae60"}, c.Name == "e2e" && c.AppliedRate > 0
	}
	n := float64(len(r.Configs))
	for _, c := range r.Configs {
		if _, ok := consumerBar(c); ok {
			n++
		}
	}
	panelH := 40 + n*(barH+gap) + 30
	height := 60 + 2*panelH + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	s := r.Settings
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="17" text-anchor="middle" font-weight="bold">hookgate vs the floor: %d conns, %d B bodies, %d rounds A/B</text>`+"\n", width/2, s.Conns, s.BodyBytes, s.Rounds)
	noise := 0.0
	for _, c := range r.Configs {
		noise = max(noise, c.OtherCPUs)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="42" font-size="12" text-anchor="middle" fill="#555">%s, %s; other processes kept up to %.2f CPUs busy</text>`+"\n",
		width/2, html.EscapeString(r.Machine), r.Time.Format("2006-01-02 15:04 MST"), noise)
	floor := r.config("floor")
	panel := func(y0 float64, title string, bars []bar, refs []struct {
		v     float64
		label string
	}) {
		fmt.Fprintf(&b, `<text x="10" y="%.0f" font-size="15" font-weight="bold">%s</text>`+"\n", y0+20, html.EscapeString(title))
		maxV := 0.0
		for _, br := range bars {
			maxV = max(maxV, br.v)
		}
		for _, rf := range refs {
			maxV = max(maxV, rf.v)
		}
		if maxV == 0 {
			maxV = 1
		}
		plotW := width - labelW - right
		sc := plotW / (maxV * 1.05)
		y := y0 + 36
		for _, br := range bars {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`, labelW-8, y+barH-6, html.EscapeString(br.label))
			fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.1f" height="%.0f" fill="%s"/>`, labelW, y, max(br.v*sc, 1), barH, br.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f">%s</text>`+"\n", labelW+br.v*sc+6, y+barH-6, html.EscapeString(br.text))
			y += barH + gap
		}
		for _, rf := range refs {
			x := labelW + rf.v*sc
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#c0392b" stroke-dasharray="5,4"/>`, x, y0+30, x, y)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="11" fill="#c0392b" text-anchor="middle">%s</text>`+"\n", x, y+14, html.EscapeString(rf.label))
		}
	}
	color := func(c ConfigResult) string {
		if c.Name == "floor" {
			return "#7f8c8d"
		}
		return "#2e86c1"
	}
	var tp, lat []bar
	for _, c := range r.Configs {
		tp = append(tp, bar{c.Label, c.RPS, fmt.Sprintf("%.0f/s  %.2fx", c.RPS, c.RatioRPS), color(c)})
		lat = append(lat, bar{c.Label, c.P99ms, fmt.Sprintf("%.2f ms  %.2fx", c.P99ms, c.RatioP99), color(c)})
		if cb, ok := consumerBar(c); ok {
			tp = append(tp, cb)
		}
	}
	type ref = struct {
		v     float64
		label string
	}
	panel(60, "Throughput, requests/s (higher is better)", tp, []ref{{floor.RPS * 0.9, "goal 0.9x floor"}})
	panel(60+panelH, "p99 latency, ms (lower is better)", lat, []ref{{floor.P99ms * 2, "goal 2x floor"}})
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
