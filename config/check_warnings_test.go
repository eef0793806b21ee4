package config

import (
	"errors"
	"testing"
)

// README (Configuration): "config check reports every problem at once: a key
// it cannot read hides only the checks that read it (a misspelt `http` key no
// longer hides a bad `dedup.window`, nor an unset secret variable ...)".
// parse() keeps only c.Check().Errors() once decode found a problem, so every
// warning vanishes: a short dedup.window, and the security warning about an
// unsigned event-id header, disappear behind a typo elsewhere or an unset
// secret variable (the CI case the README names).
func TestWarningsSurviveAnUnrelatedDecodeProblem(t *testing.T) {
	cases := []struct {
		name, data, wantKey string
		env                 map[string]string
	}{
		{"typo in http hides short dedup.window warning",
			"htpp: {listen: \"127.0.0.1:1\"}\ndedup: {window: 5s}\n" + review9Provider,
			"dedup.window", nil},
		{"typo in consumer hides unsigned event_id warning",
			"consumr: {workers: 4}\nproviders:\n  gh:\n    signature: {scheme: github, secrets: [abc]}\n    event_id: [\"header:X-GitHub-Delivery\"]\n",
			"providers.gh.event_id[0]", nil},
		{"unset secret hides unsigned event_id warning of the same provider",
			"providers:\n  gh:\n    signature: {scheme: github, secrets: [\"${UNSET_GH}\"]}\n    event_id: [\"header:X-GitHub-Delivery\"]\n",
			"providers.gh.event_id[0]", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "", envOf(tc.env))
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v; want Problems", err)
			}
			if _, ok := findProblem(ps, tc.wantKey, ""); !ok {
				t.Errorf("no problem (warning) on %s; got:\n%v", tc.wantKey, ps)
			}
		})
	}
}
