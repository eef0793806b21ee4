package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser: it must never panic or
// hang, must fail only with a non-empty Problems, and a config it accepts
// must have every default set and a Validate consistent with Check.
// Seeds: testdata/*.yaml and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"contract.yaml", "minimal.yaml", "multi.yaml"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	getenv := envOf(map[string]string{"GRANTSGOV_SECRET": "whsec_aG9va2dhdGUtY29uZmlnLXRlc3Qta2V5", "A": "1", "D": "5m", "S": "file:x"})
	readFile := func(_, path string) (string, error) {
		if path == "missing" {
			return "", errors.New("secret file: missing: no such file")
		}
		return "from-" + path, nil
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse(data, "/base", getenv, readFile)
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error is not a non-empty Problems: %v", err)
			}
			// Warnings come along (config check shows every problem at
			// once), but a failed parse has an error among them.
			if len(ps.Errors()) == 0 {
				t.Fatalf("parse failed with warnings only: %v", ps)
			}
			for _, p := range ps {
				if p.Msg == "" {
					t.Fatalf("bad parse problem %#v", p)
				}
			}
			return
		}
		if c.Providers == nil || c.HTTP.Listen == "" || c.NATS.Embedded.Sync == "" || c.NATS.Embedded.DataDir == "" {
			t.Fatalf("defaults missing: %+v", c)
		}
		for name, p := range c.Providers {
			if p.Name != name || p.Effects.Publish == nil || p.Fallback == "" || p.Ordering == "" || p.Account.Value == "" {
				t.Fatalf("provider %q defaults missing: %+v", name, p)
			}
		}
		ps := c.Check()
		for _, p := range ps {
			if p.Msg == "" {
				t.Fatalf("problem without a message: %#v", p)
			}
		}
		if err := c.Validate(); (err == nil) != (len(ps.Errors()) == 0) {
			t.Fatalf("Validate() = %v, but Check() has %d errors", err, len(ps.Errors()))
		}
	})
}
