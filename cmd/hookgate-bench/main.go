// Command hookgate-bench measures hookgate against the floor (issue 6):
// one run, every configuration alternated round by round on this machine,
// one table on stdout, the same figures in bench/results/latest.json and a
// plot in bench/results/latest.svg; then a CPU profile of the gateway and
// the memory each tracked key costs the server. The logic lives in package
// bench; this file is flags and wiring.
//
// Hidden subcommands run the children the harness starts: floor, gateway,
// keys-fill, keys-restart.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hookgate/hookgate/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintf(os.Stderr, "hookgate-bench: %s\n", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "hookgate-bench: %s\n", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "floor":
			return runFloor(ctx, args[1:], stdout)
		case "gateway":
			return runGateway(ctx, args[1:], stdout, stderr)
		case "keys-fill":
			return runKeysFill(ctx, args[1:], stdin, stdout, stderr)
		case "keys-restart":
			return runKeysRestart(ctx, args[1:], stdout, stderr)
		case "run":
			args = args[1:]
		}
	}
	return runBench(ctx, args, stdout, stderr)
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hookgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := bench.Options{}
	hookgate := fs.String("hookgate", "", "hookgate binary to measure (default: go build ./cmd/hookgate into a temp dir)")
	fs.StringVar(&o.Out, "out", "bench/results", "results directory (NAME.txt, NAME.json, NAME.svg, cpu-*.pprof and flame graphs); empty: table only")
	fs.StringVar(&o.Work, "work", "", "scratch directory for data dirs (default: a temp dir, removed at the end)")
	fs.IntVar(&o.Conns, "conns", 32, "keep-alive connections")
	fs.IntVar(&o.BodySize, "body", 1024, "body size in bytes")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "warm-up per configuration and round (sent, not measured)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time per configuration and round")
	fs.IntVar(&o.Rounds, "rounds", 2, "rounds; each runs every configuration once, in turn (A/B/A/B); 0 skips the load (keys and profile only)")
	fs.StringVar(&o.Name, "name", "latest", "base name of the JSON and SVG results (NAME.json, NAME.svg)")
	fs.Float64Var(&o.Redeliver, "redeliver", 0.5, "share of redeliveries in the 'redeliver' configuration")
	fs.IntVar(&o.Workers, "workers", 0, "consumer.workers in the end-to-end configurations (0: hookgate's default, 8)")
	fs.BoolVar(&o.FloorLease, "floor-lease", false, "the floor's consumer ('floor-sustained') also claims each watermark entry before its publish, as hookgate does: three writes per event")
	fs.Float64Var(&o.Pace, "pace", 0.5, "the 'sustained' configuration: end to end with the load paced at this share of the same round's hmac rate, and 'floor-sustained', the floor's end to end, at this share of the floor's rate; 0 leaves both out")
	only := fs.String("only", "", "comma-separated configurations to run besides the floor: hmac,standard,redeliver,digest,e2e,sustained,floor-sustained (sustained brings hmac)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 90*time.Second, "end to end: how long to wait for the consumer's lag to return to 0")
	fs.IntVar(&o.Keys, "keys", 1_000_000, "tracked keys for the memory-per-key and restart measurement (10000000 for the 10M figure); 0 skips")
	fs.IntVar(&o.KeysBody, "keys-body", 1024, "body bytes of each tracked-key message")
	fs.DurationVar(&o.KeysSettle, "keys-settle", 12*time.Second, "wait after filling, for the file store's block caches (10s) to expire, before reading RSS")
	fs.BoolVar(&o.KeysApplied, "keys-applied", true, "also measure an APPLIED-like KV bucket (the consumer's per-key memory)")
	fs.DurationVar(&o.KeysWindow, "keys-window", 2*time.Minute, "dedup.window of the key measurement (WEBHOOKS's and GRANTS's duplicate windows); the fill waits it out")
	fs.BoolVar(&o.Profile, "profile", true, "capture a CPU profile of the hmac gateway under load (cpu-gateway.pprof and a flame graph SVG)")
	fs.DurationVar(&o.ProfileDuration, "profile-duration", 10*time.Second, "length of the CPU profile")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if o.Rounds < 0 || o.Conns < 1 || o.Duration <= 0 || !(o.Pace >= 0) || math.IsInf(o.Pace, 0) {
		return usageError{errors.New("-conns and -duration must be positive, -rounds not negative, -pace a finite number, 0 or more")}
	}
	if o.Profile && (o.ProfileDuration < time.Second || o.ProfileDuration%time.Second != 0) {
		// net/http/pprof profiles whole seconds: the CPU per request is
		// the profile's CPU over the requests of this window (review X).
		return usageError{fmt.Errorf("-profile-duration %s: want whole seconds, 1s or more", o.ProfileDuration)}
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.Self = self
	o.Hookgate = *hookgate
	if o.Hookgate == "" {
		dir, err := os.MkdirTemp("", "hookgate-bench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if o.Hookgate, err = buildHookgate(ctx, dir, stderr); err != nil {
			return err
		}
	}
	o.Command = "hookgate-bench " + strings.Join(args, " ")
	o.Log = stderr
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	var table bytes.Buffer
	rep.WriteTable(io.MultiWriter(stdout, &table))
	if o.Out != "" {
		if err := os.WriteFile(filepath.Join(o.Out, o.Name+".txt"), table.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s, %s", filepath.Join(o.Out, o.Name+".txt"), filepath.Join(o.Out, o.Name+".json"))
		if len(rep.Configs) > 0 {
			fmt.Fprintf(stdout, ", %s", filepath.Join(o.Out, o.Name+".svg"))
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// buildHookgate builds ./cmd/hookgate of the module in the working
// directory.
func buildHookgate(ctx context.Context, dir string, stderr io.Writer) (string, error) {
	out := filepath.Join(dir, "hookgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/hookgate/hookgate/cmd/hookgate")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build hookgate (or pass -hookgate): %w", err)
	}
	return out, nil
}

func runFloor(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory")
	listen := fs.String("listen", "127.0.0.1:0", "HTTP address")
	maxBody := fs.Int64("max-body", 1<<20, "body limit")
	o := bench.FloorOptions{}
	fs.IntVar(&o.NATSPort, "nats-port", 0, "also let NATS clients in on this loopback port (with -token)")
	fs.StringVar(&o.Token, "token", "", "NATS token for -nats-port")
	fs.IntVar(&o.Consumer.Workers, "consumer", 0, "run the floor's consumer with this many workers (0: gateway only)")
	fs.BoolVar(&o.Consumer.Lease, "lease", false, "the floor's consumer also claims each watermark entry before its publish")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *dir == "" {
		return usageError{errors.New("floor: -dir is required")}
	}
	o.Dir, o.Listen, o.MaxBody = *dir, *listen, *maxBody
	return bench.RunFloor(ctx, o, stdout)
}

func runKeysFill(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys-fill", flag.ContinueOnError)
	o := bench.KeysFillOptions{}
	fs.StringVar(&o.Dir, "dir", "", "data directory")
	fs.IntVar(&o.N, "n", 1_000_000, "keys")
	fs.IntVar(&o.BodySize, "body", 1024, "body bytes")
	fs.DurationVar(&o.Settle, "settle", 12*time.Second, "wait before reading RSS")
	fs.BoolVar(&o.Applied, "applied", true, "also fill an APPLIED-like KV bucket")
	fs.DurationVar(&o.Window, "window", 2*time.Minute, "dedup.window")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if o.Dir == "" {
		return usageError{errors.New("keys-fill: -dir is required")}
	}
	return bench.RunKeysFill(ctx, o, stdin, stdout, stderr)
}

func runKeysRestart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys-restart", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory")
	probe := fs.String("probe", "", "an id stored before the restart")
	settle := fs.Duration("settle", 12*time.Second, "wait before reading RSS")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *dir == "" || *probe == "" {
		return usageError{errors.New("keys-restart: -dir and -probe are required")}
	}
	return bench.RunKeysRestart(ctx, *dir, *probe, *settle, stdout, stderr)
}
