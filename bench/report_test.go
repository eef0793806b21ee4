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
