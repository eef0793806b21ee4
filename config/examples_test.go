package config

import (
	"path/filepath"
	"testing"
)

// The shipped examples load and validate as they are, with no environment
// set (their secrets fall back to development defaults): `make run` and
// README's walkthroughs start from them.
func TestExamplesValidate(t *testing.T) {
	paths, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 {
		t.Fatalf("examples: %v, want hookgate.yaml and forward.yaml at least", paths)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			cfg, err := Load(p, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(cfg.Providers) == 0 {
				t.Errorf("%s: no provider", p)
			}
		})
	}
}
