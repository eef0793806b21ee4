package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hookgate/hookgate/bench"
)

// The harness re-runs its own executable as the floor, the profiled
// gateway and the key-counting children; under `go test` that executable
// is the test binary, which dispatches here instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv(bench.ChildEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "hookgate-bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func slicesIndex(rounds []bench.RoundResult, config string) int {
	for i, r := range rounds {
		if r.Config == config {
			return i
		}
	}
	return -1
}

// TestSmoke runs the whole harness for about a second per configuration
// and checks what it produced: a table row per configuration with
// non-zero rps and no errors, redeliveries answered as duplicates, the
// consumer catching up end to end, the JSON and SVG files, a parsed CPU
// profile and a key measurement whose old id stays a duplicate across
// restarts. It checks no timing.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and generates load for about 20s")
	}
	work := t.TempDir()
	hookgate := filepath.Join(work, "hookgate")
	if out, err := exec.Command("go", "build", "-o", hookgate, "github.com/hookgate/hookgate/cmd/hookgate").CombinedOutput(); err != nil {
		t.Fatalf("build hookgate: %v\n%s", err, out)
	}
	out := filepath.Join(work, "results")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{
		"-hookgate", hookgate, "-out", out, "-work", filepath.Join(work, "scratch"),
		"-conns", "8", "-warmup", "200ms", "-duration", "1s", "-rounds", "1",
		"-drain-timeout", "60s", "-pace", "0.2", "-keys", "3000", "-keys-settle", "0s", "-keys-window", "1s", "-profile-duration", "1s",
	}, nil, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	t.Logf("\n%s", table)

	var rep bench.Report
	b, err := os.ReadFile(filepath.Join(out, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := bench.Configurations(0.5, 0.2)
	if len(rep.Configs) != len(want) {
		t.Fatalf("%d configurations in latest.json, want %d", len(rep.Configs), len(want))
	}
	for i, c := range rep.Configs {
		if c.Name != want[i].Name {
			t.Errorf("configuration %d is %s, want %s", i, c.Name, want[i].Name)
		}
		if !strings.Contains(table, c.Label) {
			t.Errorf("table has no row %q", c.Label)
		}
		if c.RPS <= 0 || c.P99ms <= 0 || c.RSSMax <= 0 {
			t.Errorf("%s: rps %.0f, p99 %.2fms, rss %d: want all > 0", c.Name, c.RPS, c.P99ms, c.RSSMax)
		}
		if c.Errors != 0 {
			t.Errorf("%s: %d errors (correctly signed requests must all get 200)", c.Name, c.Errors)
		}
		switch c.Name {
		case "redeliver":
			if c.Duplicates == 0 {
				t.Errorf("redeliver: no duplicate answers for %d requests", c.Sent)
			}
		case "e2e":
			if c.Drained == nil || !*c.Drained || c.AppliedRate <= 0 {
				t.Errorf("e2e: drained %v, applied %.0f/s", c.Drained, c.AppliedRate)
			}
		case "sustained":
			// Paced at a fifth of the hmac round's rate (far below what the
			// closed-loop e2e round reaches): never a request more than the
			// schedule's slots over the warm-up and the window.
			hm := rep.Rounds[slicesIndex(rep.Rounds, "hmac")].RPS
			r := rep.Rounds[slicesIndex(rep.Rounds, "sustained")]
			p := c.Paced
			if c.Drained == nil || !*c.Drained || p == nil || p.Rounds != 1 || p.WindowApplied <= 0 || p.Scheduled != 0.2*hm || !offeredAsSent(p) ||
				r.E2E == nil || float64(r.Sent) > math.Ceil(p.Scheduled*1.2) {
				t.Errorf("sustained: drained %t, paced %+v (hmac %.0f rps), sent %d over 1.2 s", c.Drained != nil && *c.Drained, p, hm, r.Sent)
			}
		case "floor-sustained":
			// The floor's own end to end, paced at a fifth of the floor
			// round's rate; its consumer applied every stored event (below).
			fl := rep.Rounds[slicesIndex(rep.Rounds, "floor")].RPS
			if p := c.Paced; c.Drained == nil || !*c.Drained || p == nil || p.Rounds != 1 || p.WindowApplied <= 0 || p.Scheduled != 0.2*fl || !offeredAsSent(p) || c.Peak != "floor" {
				t.Errorf("floor-sustained: drained %t, paced %+v (floor %.0f rps), peak %q", c.Drained != nil && *c.Drained, p, fl, c.Peak)
			}
		default:
			if c.Duplicates != 0 {
				t.Errorf("%s: %d duplicates without redeliveries", c.Name, c.Duplicates)
			}
		}
	}
	for _, r := range rep.Rounds {
		if r.E2E != nil && r.E2E.Applied != r.E2E.Stored {
			t.Errorf("e2e: %d applied of %d stored", r.E2E.Applied, r.E2E.Stored)
		}
	}
	if svg, err := os.ReadFile(filepath.Join(out, "latest.svg")); err != nil || !bytes.HasPrefix(svg, []byte("<svg")) {
		t.Errorf("latest.svg: %v %.40q", err, svg)
	}
	if p := rep.Profile; p == nil || len(p.Components) == 0 || p.Floor == nil || len(p.PerRequest) == 0 {
		t.Errorf("profile lacks the gateway's or the floor's components: %+v", p)
	} else {
		for _, f := range []string{p.File, p.FlameSVG, p.Floor.File, p.Floor.FlameSVG} {
			if _, err := os.Stat(f); err != nil {
				t.Error(err)
			}
		}
	}
	// The fill, then the ids a steady rate leaves in the window.
	if k := rep.Keys; k == nil || k.Fill.StreamMsgs != uint64(3000+k.Fill.WindowN) || k.Fill.WindowN < 1 || len(k.Restarts) != 2 {
		t.Errorf("keys: %+v", k)
	}
}

// offeredAsSent: a paced row offers its schedule, or, when the load
// generator sent less than 98% of it (a busy machine: a CI run beside
// other work sent 1584/s of 1726/s), what it sent, below the schedule
// (review X's rule). The smoke test asserted the schedule alone and failed
// on such a machine.
func offeredAsSent(p *bench.PacedResult) bool {
	return p.Offered == p.Scheduled || p.Offered > 0 && p.Offered < 0.98*p.Scheduled
}
