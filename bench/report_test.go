package bench

import (
	"strings"
	"testing"
)

// A configuration with errors decides no goal: its rates count only 200s,
// so a gateway answering 401 fast (a signing mistake) would otherwise
// look like one beating the floor.
func TestGoalsWithErrorsDecideNothing(t *testing.T) {
	r := &Report{Configs: []ConfigResult{
		{Name: "floor", Rounds: 1, RPS: 10000, P99ms: 10, RatioRPS: 1, RatioP99: 1},
		{Name: "hmac", Rounds: 1, RPS: 30000, P99ms: 2, RatioRPS: 3, RatioP99: 0.2, Errors: 90000},
	}}
	r.goals()
	if len(r.Goals) != 2 {
		t.Fatalf("goals %+v, want the two gateway goals", r.Goals)
	}
	for _, g := range r.Goals {
		if !strings.HasPrefix(g.Met, "n/a") {
			t.Errorf("goal %q: %q with every hmac request an error, want n/a", g.Goal, g.Met)
		}
	}
}

// TestKeptUp: the paced goal is met only when the load was offered at
// half the peak, the gateway answered it, the consumer applied it within
// the window and was under a second behind at its end, and drained (over
// an even number of rounds, whose medians are averages).
func TestKeptUp(t *testing.T) {
	yes, no := true, false
	// Two rounds: hmac 10001 and 10002 rps, offered half of each.
	hmac := []RoundResult{
		{Round: 1, Config: "hmac", RPS: 10001, hist: &Histogram{}},
		{Round: 2, Config: "hmac", RPS: 10002, hist: &Histogram{}},
	}
	paced := func(offered, answered, applied float64, lagEnd uint64) []RoundResult {
		var rs []RoundResult
		for i, h := range hmac {
			o := h.RPS * offered
			rs = append(rs, RoundResult{Round: i + 1, Config: "sustained", RPS: o * answered, hist: &Histogram{},
				E2E: &E2EResult{Offered: o, WindowSeconds: 10, WindowApplied: o * answered * applied, WindowLagEnd: lagEnd, Drained: true}})
		}
		return rs
	}
	cfgs := []Configuration{{Name: "hmac"}, {Name: "sustained", EndToEnd: true, Pace: 0.5}}
	for _, tc := range []struct {
		name    string
		rounds  []RoundResult
		drained *bool
		want    bool
	}{
		{"kept up", paced(0.5, 1, 1, 0), &yes, true},
		{"a second behind", paced(0.5, 1, 1, 6000), &yes, false},
		{"consumer short", paced(0.5, 1, 0.95, 0), &yes, false},
		{"gateway short", paced(0.5, 0.9, 1, 0), &yes, false},
		{"paced below half", paced(0.45, 1, 1, 0), &yes, false},
		{"not drained", paced(0.5, 1, 1, 0), &no, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crs := aggregate(cfgs, append(append([]RoundResult(nil), hmac...), tc.rounds...))
			c := crs[1]
			c.Drained = tc.drained
			if got := keptUp(c, crs[0].RPS); got != tc.want {
				t.Fatalf("keptUp = %t, want %t (paced %+v, answered %.1f/s, hmac %.1f rps)", got, tc.want, c.Paced, c.RPS, crs[0].RPS)
			}
		})
	}
	if keptUp(ConfigResult{Drained: &yes}, 1) {
		t.Fatal("kept up without a paced result")
	}
}
