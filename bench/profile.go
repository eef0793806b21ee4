package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// profiled is one server profiled under load.
type profiled struct {
	p    *Profile
	load LoadResult
	file string
}

// profileOne runs c once more with a CPU profile fetched from the child's
// /debug/pprof/profile over the measured window: the floor child mounts
// pprof itself, hookgate is run as the "gateway" child (serve's gateway
// wiring plus pprof). The profile is written to out/NAME.pprof.
func (h *harness) profileOne(ctx context.Context, c Configuration, out, name string) (*profiled, error) {
	dir := filepath.Join(h.o.Work, "profile-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var argv []string
	if !c.Floor {
		argv = []string{h.o.Self, "gateway"}
	}
	child, _, _, err := h.server(ctx, c, dir, argv)
	if err != nil {
		return nil, err
	}
	defer child.Kill()
	lo, err := h.loadOptions(c, 0, child.Addr)
	if err != nil {
		return nil, err
	}
	lo.Duration = h.o.ProfileDuration
	path := filepath.Join(out, name+".pprof")
	fetched := make(chan error, 1)
	lo.OnWindow = func(start bool) {
		if start {
			go func() { fetched <- fetchProfile(child.Addr, h.o.ProfileDuration, path) }()
		}
	}
	fmt.Fprintf(h.o.Log, "profiling %s for %s...\n", c.Name, h.o.ProfileDuration)
	lr, err := Load(ctx, lo)
	if err != nil {
		return nil, err
	}
	if err := <-fetched; err != nil {
		return nil, err
	}
	_ = child.Stop(30 * time.Second)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParseProfile(data)
	if err != nil {
		return nil, err
	}
	return &profiled{p: p, load: lr, file: path}, nil
}

// flame writes pr's flame graph to out/NAME-flame.svg.
func (h *harness) flame(pr *profiled, out, name, what string) (string, error) {
	path := filepath.Join(out, name+"-flame.svg")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	title := fmt.Sprintf("%s under load: %.0f rps, %d conns, %d B bodies, CPU profile %s",
		what, pr.load.RPS, h.o.Conns, h.o.BodySize, h.o.ProfileDuration)
	if err := WriteFlameGraph(f, pr.p, title, 0.1); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// usPerRequest converts a profile value (CPU ns over the window) into
// microseconds per request measured in that window.
func (pr *profiled) usPerRequest(v int64) float64 {
	if pr.load.Measured == 0 {
		return 0
	}
	return float64(v) / 1e3 / float64(pr.load.Measured)
}

// profile takes CPU profiles of the floor and of the hmac gateway under
// the same load and compares where each spends its CPU per request.
func (h *harness) profile(ctx context.Context) (*ProfileResult, error) {
	var floorCfg, gwCfg Configuration
	for _, x := range Configurations(h.o.Redeliver, 0) {
		switch x.Name {
		case "floor":
			floorCfg = x
		case "hmac":
			gwCfg = x
		}
	}
	out := h.o.Out
	if out == "" {
		out = filepath.Join(h.o.Work, "profiles")
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
	}
	fl, err := h.profileOne(ctx, floorCfg, out, "cpu-floor")
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	gw, err := h.profileOne(ctx, gwCfg, out, "cpu-gateway")
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	res := &ProfileResult{Config: gwCfg.Name, RPS: gw.load.RPS, Seconds: h.o.ProfileDuration.Seconds(), File: gw.file}
	if res.FlameSVG, err = h.flame(gw, out, "cpu-gateway", "hookgate gateway (hmac-sha256, json id)"); err != nil {
		return nil, err
	}
	res.Floor = &ProfileSide{RPS: fl.load.RPS, File: fl.file}
	if res.Floor.FlameSVG, err = h.flame(fl, out, "cpu-floor", "the floor (POST -> sync publish with Nats-Msg-Id)"); err != nil {
		return nil, err
	}
	if graph, err := pprofGraph(gw.file, filepath.Join(out, "cpu-gateway-graph.svg")); err == nil {
		res.GraphSVG = graph
	} else {
		fmt.Fprintf(h.o.Log, "call graph SVG skipped: %v\n", err)
	}
	res.Components = gw.p.Components()
	res.Floor.Components = fl.p.Components()
	res.TopCum, res.TopFlat = gw.p.Top(25)
	res.PerRequest = compareComponents(fl, gw)
	res.Floor.TotalUS = fl.usPerRequest(fl.p.Total)
	res.TotalUS = gw.usPerRequest(gw.p.Total)
	for _, a := range []struct{ name, part string }{
		{"net/http.(*conn).serve (whole HTTP side, handler included)", "net/http.(*conn).serve"},
		{"gateway handler (handleWebhook, publish wait included)", ").handleWebhook"},
		{"hookgate Publisher.Publish (nats.go sync publish)", "jetstream.(*Publisher).Publish"},
		{"signature verify", "gateway.(*hmacScheme).Verify"},
		{"JSON parse + key derivation (DeriveKey)", "gateway.DeriveKey"},
		{"stored headers (JSON lookups)", ").storedHeaders"},
		{"answer (writeOK, writeJSON)", "gateway.write"},
		{"log lines (slog; per-request ones are debug)", "log/slog.(*Logger).LogAttrs"},
		{"prometheus observe/inc", "github.com/prometheus/"},
		{"audit writer (packed AUDIT publishes)", "jetstream.(*AuditWriter)"},
		{"nats-server stream processing (WEBHOOKS + AUDIT)", "server.(*stream).processJetStreamMsg"},
		{"nats-server file store writes", "server.(*fileStore).StoreMsg"},
		{"nats-server in-process client read loops", "server.(*client).readLoop"},
		{"GC background mark", "runtime.gcBgMarkWorker"},
		{"malloc", "runtime.mallocgc"},
		{"syscalls", "syscall."},
	} {
		res.Shares = append(res.Shares, FuncShare{Name: a.name, Cum: gw.p.Share(func(f string) bool { return strings.Contains(f, a.part) })})
	}
	return res, nil
}

// compareComponents lists each component's CPU per request in the floor
// and in the gateway, the biggest difference first.
func compareComponents(fl, gw *profiled) []ComponentCost {
	byName := map[string]*ComponentCost{}
	get := func(name string) *ComponentCost {
		c := byName[name]
		if c == nil {
			c = &ComponentCost{Name: name}
			byName[name] = c
		}
		return c
	}
	for _, c := range fl.p.Components() {
		get(c.Name).FloorUS = fl.usPerRequest(c.Value)
	}
	for _, c := range gw.p.Components() {
		get(c.Name).GatewayUS = gw.usPerRequest(c.Value)
	}
	out := make([]ComponentCost, 0, len(byName))
	for _, c := range byName {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := out[i].GatewayUS-out[i].FloorUS, out[j].GatewayUS-out[j].FloorUS
		if di != dj {
			return di > dj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func fetchProfile(addr string, d time.Duration, path string) error {
	if d < time.Second || d%time.Second != 0 {
		// pprof profiles whole seconds; the load's window, the divisor of
		// CPU per request, is d itself (review X: 2.5s profiled 3).
		return fmt.Errorf("fetch profile: %s is not a whole number of seconds", d)
	}
	secs := int(d / time.Second)
	client := &http.Client{Timeout: d + 30*time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
	if err != nil {
		return fmt.Errorf("fetch profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("fetch profile: %s: %s", resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pprofGraph renders the call graph with `go tool pprof -svg`, which needs
// graphviz's dot.
func pprofGraph(profile, out string) (string, error) {
	if _, err := exec.LookPath("dot"); err != nil {
		return "", errors.New("graphviz 'dot' not found (apt-get install graphviz)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(goBin, "tool", "pprof", "-svg", "-nodefraction=0.005", "-output", out, profile)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go tool pprof: %v: %s", err, b)
	}
	return out, nil
}
