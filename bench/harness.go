// Package bench is hookgate's benchmark harness (issue 6): it measures
// hookgate against a floor (the least a gateway on JetStream can do) in
// one run, alternating configurations round by round on the same machine,
// with a load generator of its own; and it measures the memory each
// tracked key costs the server, restart-to-ready, and where the gateway's
// CPU time goes. cmd/hookgate-bench is its command line.
//
// Every server under test runs in a process of its own (the floor is this
// program re-run with the "floor" subcommand, hookgate is the built
// binary's `serve`), so RSS and CPU are read per process from /proc, the
// same way for both sides. Timings are reported, never asserted.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookgate/hookgate/config"
)

// Options configure a harness run.
type Options struct {
	Self     string // this program: re-run as "floor", "gateway", "keys-fill", "keys-restart"
	Hookgate string // the hookgate binary
	Out      string // results directory; "" writes nothing but the table
	Name     string // base name of the JSON and SVG files; "" = "latest"
	Work     string // scratch directory for data dirs; "" = a new temp dir, removed at the end

	Conns        int
	BodySize     int
	MaxBody      int64
	Warmup       time.Duration
	Duration     time.Duration
	Rounds       int
	Redeliver    float64  // share of redeliveries in the "redeliver" configuration
	Workers      int      // consumer.workers for the end-to-end configurations; 0: hookgate's default
	FloorLease   bool     // the floor's consumer also claims each watermark entry before its publish
	Pace         float64  // the "sustained" configuration's rate, a share of the round's hmac rate; 0 leaves it out
	Only         []string // configuration names to run; empty = all
	DrainTimeout time.Duration

	Keys        int // tracked keys to measure; 0 skips
	KeysBody    int
	KeysSettle  time.Duration
	KeysApplied bool
	KeysWindow  time.Duration // dedup.window of the key measurement (0: 2 m)

	Profile         bool
	ProfileDuration time.Duration

	Command string    // how the run was invoked, for the report
	Log     io.Writer // progress lines
}

// Run measures every configuration Rounds times, alternating them round
// by round (floor, hmac, standard, ..., floor, hmac, ...), then profiles
// the gateway and measures tracked keys, and returns the report. It
// writes NAME.json, NAME.svg and the profile files to o.Out.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Name == "" {
		o.Name = "latest"
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.Work == "" {
		dir, err := os.MkdirTemp("", "hookgate-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.Work = dir
	}
	if o.Out != "" {
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return nil, err
		}
	}
	all := Configurations(o.Redeliver, o.Pace)
	for _, name := range o.Only {
		if !slices.ContainsFunc(all, func(c Configuration) bool { return c.Name == name }) {
			return nil, fmt.Errorf("unknown configuration %q; want floor, hmac, standard, redeliver, digest, e2e, or sustained or floor-sustained (with -pace above 0)", name)
		}
	}
	var cfgs []Configuration
	for _, c := range all {
		// The paced run's rate is a share of the hmac round's.
		needed := c.Name == "floor" || c.Name == "hmac" && slices.Contains(o.Only, "sustained")
		if len(o.Only) == 0 || slices.Contains(o.Only, c.Name) || needed {
			cfgs = append(cfgs, c)
		}
	}
	h := &harness{o: o, nonce: nonce()}
	rep := &Report{
		Time:    start,
		Command: o.Command,
		Machine: machine(),
		Settings: Settings{Conns: o.Conns, BodyBytes: o.BodySize, WarmupS: o.Warmup.Seconds(), DurationS: o.Duration.Seconds(),
			Rounds: o.Rounds, Redeliveries: o.Redeliver, Keys: o.Keys},
	}
	for round := 1; round <= o.Rounds; round++ {
		rps := map[string]float64{}
		for _, c := range cfgs {
			peak := rps[c.Peak()]
			r, err := h.round(ctx, round, c, c.Pace*peak)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round, c.Name, err)
			}
			rps[c.Name] = r.RPS
			if r.E2E != nil && peak > 0 {
				r.E2E.AppliedVsPeakGw = r.E2E.AppliedRate / peak
				if c.Pace > 0 {
					r.E2E.AppliedVsPeakGw = r.E2E.WindowApplied / peak
				}
			}
			fmt.Fprintf(o.Log, "round %d/%d %-9s %8.0f rps  p50 %6.2fms  p99 %6.2fms  cpu %4.0fµs/req  rss %s  errors %d  other procs %.2f CPUs%s\n",
				round, o.Rounds, c.Name, r.RPS, r.P50ms, r.P99ms, r.ServerCPUus, mib(r.RSSPeak), r.Errors, r.OtherCPUs, e2eNote(r.E2E))
			rep.Rounds = append(rep.Rounds, r)
		}
	}
	rep.Configs = aggregate(cfgs, rep.Rounds)
	if o.Profile {
		p, err := h.profile(ctx)
		if err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
		rep.Profile = p
	}
	if o.Keys > 0 {
		fmt.Fprintf(o.Log, "tracked keys: filling %d ids...\n", o.Keys)
		k, err := MeasureKeys(ctx, o.Self, filepath.Join(o.Work, "keys"), KeysFillOptions{
			N: o.Keys, BodySize: o.KeysBody, Settle: o.KeysSettle, Applied: o.KeysApplied, Window: o.KeysWindow,
		}, o.Log)
		if err != nil {
			return nil, fmt.Errorf("tracked keys: %w", err)
		}
		rep.Keys = &k
	}
	rep.goals()
	rep.Elapsed = time.Since(start).Seconds()
	if o.Out != "" {
		if err := rep.WriteJSON(filepath.Join(o.Out, o.Name+".json")); err != nil {
			return rep, err
		}
		if len(rep.Configs) > 0 {
			f, err := os.Create(filepath.Join(o.Out, o.Name+".svg"))
			if err != nil {
				return rep, err
			}
			if err := rep.WriteSVG(f); err != nil {
				f.Close()
				return rep, err
			}
			if err := f.Close(); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// floorWriteFailures reads the count the floor child prints on stopping
// when its consumer tried writes again (floorFailedLine); 0 when the log
// has no such line.
func floorWriteFailures(logTail string) uint64 {
	for _, line := range strings.Split(logTail, "\n") {
		var n uint64
		if _, err := fmt.Sscanf(line, floorFailedLine, &n); err == nil {
			return n
		}
	}
	return 0
}

func e2eNote(e *E2EResult) string {
	if e == nil {
		return ""
	}
	s := fmt.Sprintf("  applied %.0f/s (%d of %d stored), lag 0 after %.1fs: %t", e.AppliedRate, e.Applied, e.Stored, e.DrainSeconds, e.Drained)
	if e.Offered > 0 {
		s += fmt.Sprintf("; paced at %.0f/s (sent %.0f/s): applied %.0f/s in the window, lag at its end %d (at most %d)", e.Scheduled, e.Offered, e.WindowApplied, e.WindowLagEnd, e.WindowLagMax)
	}
	if e.Stall != "" {
		s += "; stalled: " + e.Stall
	}
	if e.WriteFailures > 0 {
		s += fmt.Sprintf("; %d writes failed and were tried again", e.WriteFailures)
	}
	return s
}

func nonce() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return strings.TrimSpace(fmt.Sprintf("%d CPUs %s, %s %s/%s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH))
}

type harness struct {
	o     Options
	nonce string
}

// hookgateWorkers is hookgate's default consumer.workers, which the
// floor's consumer gets too unless -workers says otherwise (held to
// config's default by TestHookgateYAML).
const hookgateWorkers = 8

// freePort returns a loopback port nobody listens on right now, for the
// embedded NATS server the child binds a moment later: from below the
// kernel's ephemeral range (32768 up on Linux), where a listener on port
// 0 or an outgoing connection elsewhere on the machine (a test run beside
// the bench's) would not take it meanwhile; and outside the ranges the
// project's tests pick from (e2e 20000-31999, cmd/hookgate 12000-19999).
func freePort() (int, error) {
	for range 1000 {
		p := 10000 + mathrand.IntN(2000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return p, nil
	}
	return 0, errors.New("no free loopback port in 10000-11999")
}

// server starts c's server in dir: the floor child, or hookgate serve on a
// generated config (gatewayArgv replaces `hookgate serve` when set).
func (h *harness) server(ctx context.Context, c Configuration, dir string, gatewayArgv []string) (*Child, int, string, error) {
	var argv []string
	prefix := "hookgate: listening on "
	natsPort, token := 0, ""
	if c.EndToEnd {
		p, err := freePort()
		if err != nil {
			return nil, 0, "", err
		}
		natsPort, token = p, "bench-"+nonce()+nonce()
	}
	if c.Floor {
		argv = []string{h.o.Self, "floor", "-dir", dir, "-listen", "127.0.0.1:0", "-max-body", fmt.Sprint(h.o.MaxBody)}
		if c.EndToEnd {
			workers := h.o.Workers
			if workers <= 0 {
				workers = hookgateWorkers
			}
			argv = append(argv, "-nats-port", fmt.Sprint(natsPort), "-token", token, "-consumer", fmt.Sprint(workers), fmt.Sprintf("-lease=%t", h.o.FloorLease))
		}
		prefix = "floor: listening on "
	} else {
		if c.EndToEnd {
			c.Workers = h.o.Workers
		}
		y := c.HookgateYAML(filepath.Join(dir, "data"), h.o.MaxBody, natsPort, token)
		if err := CheckHookgateYAML(y); err != nil {
			return nil, 0, "", fmt.Errorf("generated config is invalid: %w\n%s", err, y)
		}
		path := filepath.Join(dir, "hookgate.yaml")
		if err := os.WriteFile(path, y, 0o600); err != nil {
			return nil, 0, "", err
		}
		argv = []string{h.o.Hookgate, "serve", "--config", path}
		if gatewayArgv != nil {
			argv = append(append([]string(nil), gatewayArgv...), "-config", path)
		}
	}
	child, err := StartChild(ctx, argv, nil, filepath.Join(dir, "server.log"), prefix, 2*time.Minute)
	return child, natsPort, token, err
}

func (h *harness) loadOptions(c Configuration, round int, addr string) (LoadOptions, error) {
	sch, err := c.Signer()
	if err != nil {
		return LoadOptions{}, err
	}
	return LoadOptions{
		Addr: addr, Path: "/webhooks/" + BenchProvider, Signer: sch, Secret: config.Secret(c.Secret),
		Conns: h.o.Conns, Warmup: h.o.Warmup, Duration: h.o.Duration, BodySize: h.o.BodySize,
		Redeliver: c.Redeliver, IDPrefix: fmt.Sprintf("evt_%s_r%d_%s", h.nonce, round, c.Name),
	}, nil
}

// cpuWindow samples a process's CPU (and the harness's own) at the start
// and end of the measured window.
type cpuWindow struct {
	mu                   sync.Mutex
	pid                  int
	srv0, srv1, me0, me1 time.Duration
	all0, all1           time.Duration
	t0, t1               time.Time
}

func (w *cpuWindow) mark(start bool) {
	srv, _ := ReadCPU(w.pid)
	me, _ := ReadCPU(os.Getpid())
	all, _ := ReadBusyCPU()
	w.mu.Lock()
	defer w.mu.Unlock()
	if start {
		w.srv0, w.me0, w.all0, w.t0 = srv, me, all, time.Now()
	} else {
		w.srv1, w.me1, w.all1, w.t1 = srv, me, all, time.Now()
	}
}

// perRequest returns server and harness CPU per request, and how many
// CPUs other processes kept busy on average during the window.
func (w *cpuWindow) perRequest(n uint64) (server, client, others float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 || w.t1.IsZero() {
		return 0, 0, 0
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	other := (w.all1 - w.all0) - (w.srv1 - w.srv0) - (w.me1 - w.me0)
	return us(w.srv1 - w.srv0), us(w.me1 - w.me0), max(float64(other)/float64(w.t1.Sub(w.t0)), 0)
}

// round measures c once; rate paces the load when c.Pace is set (a share
// of this round's rate of c.Peak(), which runs first).
func (h *harness) round(ctx context.Context, round int, c Configuration, rate float64) (RoundResult, error) {
	res := RoundResult{Round: round, Config: c.Name}
	if c.Pace > 0 && rate <= 0 {
		return res, fmt.Errorf("the paced run needs the %s configuration's rate of the same round", c.Peak())
	}
	dir := filepath.Join(h.o.Work, fmt.Sprintf("r%d-%s", round, c.Name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	child, natsPort, token, err := h.server(ctx, c, dir, nil)
	if err != nil {
		return res, err
	}
	defer child.Kill()
	lo, err := h.loadOptions(c, round, child.Addr)
	if err != nil {
		return res, err
	}
	cpu := &cpuWindow{pid: child.Pid()}
	lo.OnWindow = cpu.mark
	if c.Pace > 0 {
		lo.Rate = rate
	}

	var mon *e2eMonitor
	if c.EndToEnd {
		if mon, err = newE2EMonitor(ctx, natsPort, token, c.pipeline()); err != nil {
			return res, fmt.Errorf("end to end: %w\n%s", err, child.LogTail(20))
		}
		defer mon.close()
		mon.start()
		lo.OnWindow = func(start bool) {
			cpu.mark(start)
			mon.mark(start)
		}
	}
	lr, err := Load(ctx, lo)
	if err != nil {
		return res, err
	}
	mem, _ := ReadMemory(child.Pid())
	if mon != nil {
		res.E2E = mon.drain(ctx, h.o.DrainTimeout)
		if c.Pace > 0 {
			res.E2E.Scheduled, res.E2E.Offered = rate, rate
			if sent := float64(lr.SentInWindow) / lo.Duration.Seconds(); sent < 0.98*rate {
				res.E2E.Offered = sent // see E2EResult.Offered
			}
		}
		if m, err := ReadMemory(child.Pid()); err == nil {
			mem = m
		}
	}
	res.RPS, res.hist = lr.RPS, lr.Latency
	res.P50ms, res.P99ms = ms(lr.Latency.Quantile(0.5)), ms(lr.Latency.Quantile(0.99))
	res.Measured, res.Sent, res.Accepted, res.Duplicates = lr.Measured, lr.Sent, lr.Accepted, lr.Duplicates
	res.Errors, res.Statuses, res.FirstError = lr.Errors, lr.Statuses, lr.FirstError
	res.RSSPeak, res.RSSEnd = mem.Peak, mem.RSS
	res.ServerCPUus, res.ClientCPUus, res.OtherCPUs = cpu.perRequest(lr.Measured)
	if err := child.Stop(30 * time.Second); err != nil {
		fmt.Fprintf(h.o.Log, "%s: %v\n", c.Name, err)
	}
	if c.Floor && res.E2E != nil {
		res.E2E.WriteFailures = floorWriteFailures(child.LogTail(5))
	}
	if lr.Measured == 0 {
		return res, fmt.Errorf("no request completed (errors %d, first: %s)\n%s", lr.Errors, lr.FirstError, child.LogTail(20))
	}
	return res, nil
}
