package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
	js "github.com/nats-io/nats.go/jetstream"
)

// pausableProxy forwards TCP to target; while paused, nothing goes from
// the server to the client (the client's writes still reach the server):
// a publish lands, its ack is late.
type pausableProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	paused bool
	cond   *sync.Cond
}

func newPausableProxy(t *testing.T, target string) *pausableProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausableProxy{ln: ln}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { ln.Close(); p.setPaused(false) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						p.mu.Lock()
						for p.paused {
							p.cond.Wait()
						}
						p.mu.Unlock()
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *pausableProxy) setPaused(v bool) {
	p.mu.Lock()
	p.paused = v
	p.mu.Unlock()
	p.cond.Broadcast()
}

// TestReviewUpgradePlainPublishInFlightAcrossNarrowingStoresKeyTwice: on
// the upgrade path, a publish that went out through the plain publisher
// before the switch keeps retrying with the gateway's deadline (up to 10 s,
// publishLimit) and no bound by the stream's window. Once run() has put the
// index in front and narrowed WEBHOOKS's window to dedup.window (1 s here,
// a valid config), the retry of an attempt that landed but whose ack came
// late is no longer deduplicated by the server, and the plain publisher
// never looks at the index: the key is stored twice within the horizon.
func TestReviewUpgradePlainPublishInFlightAcrossNarrowingStoresKeyTwice(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(
		"roles: { gateway: true, consumer: false }\ndedup: { horizon: 1h, window: 1s }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n",
		t.TempDir(), addr)), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)

	// The upgrade: serve's start on the previous release's store.
	sys := previousReleaseStore(t, ctx, cfg, logger)
	if kept, _, _ := jetstream.KeyIndexKept(ctx, sys.conn.JS); kept {
		t.Fatal("setup: WEBHOOKS is marked")
	}
	// The gateway's plain publisher, on a connection whose acks can be late.
	proxy := newPausableProxy(t, addr)
	pc, err := jetstream.Connect(jetstream.ConnectOptions{Name: "plain", URL: "nats://" + proxy.ln.Addr().String(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	plain := jetstream.NewPublisher(pc, 5*time.Second)
	g, err := openKeyIndexGateway(ctx, cfg, sys, logger, plain)
	if err != nil {
		t.Fatal(err)
	}
	if g.to.Load() != nil {
		t.Fatal("setup: not on the upgrade path")
	}

	const key = "grants:default:evt:in_flight"
	lastSeq := func() uint64 {
		s, err := sys.conn.JS.Stream(ctx, jetstream.StreamWebhooks)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.LastSeq
	}
	waitUntil := func(what string, d time.Duration, f func() bool) {
		t.Helper()
		end := time.Now().Add(d)
		for !f() {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// A webhook comes in before the switch; its ack is late.
	proxy.setPaused(true)
	type result struct {
		res jetstream.PublishResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := g.Publish(ctx, jetstream.Message{
			Subject: "webhooks.grants.default", Key: key, Body: []byte(`{}`),
			Header:   map[string][]string{"Hookgate-Received-At": {time.Now().Format(time.RFC3339Nano)}},
			Deadline: time.Now().Add(10 * time.Second), TellOwnWrite: true,
		})
		done <- result{res, err}
	}()
	waitUntil("the first attempt stored", 10*time.Second, func() bool { return lastSeq() >= 1 })

	// Meanwhile the key index reads back, goes in front, narrows the window.
	rctx, rcancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- g.run(rctx) }()
	defer func() { rcancel(); <-runDone; g.close() }()
	waitUntil("WEBHOOKS narrowed and marked", 15*time.Second, func() bool {
		kept, _, err := jetstream.KeyIndexKept(ctx, sys.conn.JS)
		return err == nil && kept
	})

	// The plain publisher's attempt times out (5 s) and is retried with
	// the same id, more than dedup.window after the first one landed.
	// (A correct gateway answers it duplicate: give it up to 8 s.)
	for end := time.Now().Add(8 * time.Second); lastSeq() < 2 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	proxy.setPaused(false)
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("publish did not return")
	}
	t.Logf("publish result %+v err %v", r.res, r.err)

	s, err := sys.conn.JS.Stream(ctx, jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for seq := uint64(1); seq <= s.CachedInfo().State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err == nil && m.Header.Get(js.MsgIDHeader) == key {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s stored %d times in WEBHOOKS within the horizon, want once (a plain publish in flight at the switch retried after the window was narrowed)", key, n)
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// TestReviewRemoteGatewayStartsDuringTheUpgradeAndOutlivesTheNarrowing: a
// gateway pointed by nats.url at an embedded hookgate whose gateway keeps a
// key index must refuse to start (TestServeGatewayRefusesAnEmbeddedServers
// KeyIndexedWebhooks): it would not know keys older than dedup.window. On
// the upgrade path WEBHOOKS stays unmarked while the index reads back (a
// minute at 10 M events), so such a gateway starts, and it keeps taking
// webhooks after run() narrows the window to dedup.window underneath it.
func TestReviewRemoteGatewayStartsDuringTheUpgradeAndOutlivesTheNarrowing(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := config.Parse(fmt.Appendf(nil, "roles: { consumer: false }\ndedup: { horizon: 1h, window: 1s }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n", t.TempDir(), addr), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	// The embedded serve of the upgrade, before its index is in front.
	sys := previousReleaseStore(t, ctx, cfg, logger)
	g, err := openKeyIndexGateway(ctx, cfg, sys, logger, jetstream.NewPublisher(sys.conn, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if g.to.Load() != nil {
		t.Fatal("setup: not on the upgrade path")
	}

	path := filepath.Join(t.TempDir(), "remote.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\ndedup: { horizon: 1h, window: 1s }\nnats: { url: \"nats://tok@%s\" }\n", addr)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var stdout, stderr lockedBuf
	remote := make(chan error, 1)
	go func() {
		remote <- run(rctx, []string{"serve", "--config", path}, func(string) string { return "" }, nil, &stdout, &stderr)
	}()
	end := time.Now().Add(15 * time.Second)
	for !strings.Contains(stdout.String(), "listening") {
		select {
		case err := <-remote:
			t.Logf("remote gateway refused: %v", err)
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatal("remote serve neither listened nor refused in 15 s")
		}
	}

	// The embedded index goes in front and narrows the window.
	kctx, kcancel := context.WithCancel(ctx)
	kdone := make(chan error, 1)
	go func() { kdone <- g.run(kctx) }()
	defer func() { kcancel(); <-kdone; g.close() }()
	for end := time.Now().Add(15 * time.Second); ; {
		if kept, _, err := jetstream.KeyIndexKept(ctx, sys.conn.JS); err == nil && kept {
			break
		}
		if time.Now().After(end) {
			t.Fatal("WEBHOOKS not narrowed in 15 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-remote:
		t.Logf("remote gateway stopped after the narrowing: %v", err)
	case <-time.After(2 * time.Second):
		t.Fatalf("a gateway on nats.url started during the upgrade and still takes webhooks after WEBHOOKS was narrowed to dedup.window and marked as kept by the embedded key index (it knows no keys older than 1s)\n%s", stdout.String())
	}
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	freeAddrs.Lock()
	defer freeAddrs.Unlock()
	if freeAddrs.taken == nil {
		freeAddrs.taken = map[int]bool{}
	}
	// Below the kernel's ephemeral range (32768 up on Linux): the address
	// is bound later, often again after a restart, and a port from that
	// range may meanwhile be taken by a listener on port 0 or an outgoing
	// connection of a parallel test. Never the same port twice here, and
	// none of the ranges other packages' tests pick from (e2e's nodePort
	// 20000-31999, the bench harness 10000-11999).
	for range 1000 {
		p := 12000 + rand.IntN(8000)
		if freeAddrs.taken[p] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		freeAddrs.taken[p] = true
		return addr
	}
	t.Fatal("no free port in 12000-19999")
	return ""
}

// freeAddrs holds the ports freeAddr handed out in this process.
var freeAddrs struct {
	sync.Mutex
	taken map[int]bool
}

// previousReleaseStore makes cfg's data_dir the store of the release before
// the key index (WEBHOOKS unmarked, its window the horizon), then opens it
// as serve's start does (the server restarted with that window); closed at
// cleanup.
func previousReleaseStore(t *testing.T, ctx context.Context, cfg *config.Config, logger *slog.Logger) *system {
	t.Helper()
	sys, err := openSystem(ctx, cfg, logger, "setup", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sys.conn.JS.Stream(ctx, jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	sc.Duplicates, sc.Metadata = time.Hour, nil
	if _, err := sys.conn.JS.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	sys.Close()
	sys, err = openSystem(ctx, cfg, logger, "hookgate-serve", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	return sys
}
