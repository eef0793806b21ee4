package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

const review6Secret = "review6-secret"

const review6Provider = `providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["` + review6Secret + `"] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
`

func review6Post(t *testing.T, base, body string) int {
	t.Helper()
	return review9Post(t, base, "p", body)
}

// TestReview6GatewayRunningBeforeTheUpgradeOutlivesTheNarrowing: the
// refusal of a gateway on nats.url (KeyIndexClaimed) is looked at only when
// that gateway starts. A gateway attached by nats.url to the embedded
// server while WEBHOOKS was unmarked (the previous release, or the
// embedded serve run consumer-only) keeps running through the embedded
// server's restart (it reconnects), the embedded serve then takes the
// upgrade path (pending), narrows the window to dedup.window and marks it
// "true", and the remote gateway goes on storing through a 1 s window: a
// redelivery of an event it accepted a few seconds earlier is stored again.
func TestReview6GatewayRunningBeforeTheUpgradeOutlivesTheNarrowing(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := config.Parse(fmt.Appendf(nil, "roles: { consumer: false }\ndedup: { horizon: 1h, window: 1s }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", t.TempDir(), addr, review6Provider), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)

	// The embedded hookgate run consumer-only (this release; or the
	// previous release): it creates WEBHOOKS unmarked, window the horizon.
	dataDir := cfg.NATS.Embedded.DataDir
	consumerOnly, err := config.Parse(fmt.Appendf(nil, "roles: { gateway: false, consumer: true }\ndedup: { horizon: 1h, window: 1s }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", dataDir, addr, review6Provider), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := openSystem(ctx, consumerOnly, logger, "embedded-consumer-only", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if mark, _ := jetstream.KeyIndexClaimed(ctx, sys.conn.JS); mark {
		t.Fatal("setup: WEBHOOKS marked")
	}

	// A gateway on nats.url, started then: nothing to refuse yet.
	path := filepath.Join(t.TempDir(), "remote.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\ndedup: { horizon: 1h, window: 1s }\nnats: { url: \"nats://tok@%s\" }\n%s", addr, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	var stdout, stderr lockedBuf
	remote := make(chan error, 1)
	remoteDone := make(chan struct{})
	go func() {
		defer close(remoteDone)
		remote <- run(rctx, []string{"serve", "--config", path}, func(string) string { return "" }, nil, &stdout, &stderr)
	}()
	defer func() {
		rcancel()
		select {
		case <-remoteDone:
		case <-time.After(40 * time.Second):
		}
	}()
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	var base string
	for end := time.Now().Add(15 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case err := <-remote:
			t.Fatalf("setup: remote gateway did not start: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatal("setup: remote gateway not listening in 15 s")
		}
	}
	const body = `{"id":"evt_review6","grant_id":"g1","at":"2026-12-01T10:00:00Z"}`
	if code := review6Post(t, base, body); code/100 != 2 {
		t.Fatalf("setup: first delivery answered %d", code)
	}

	// The embedded hookgate restarts as the key-index release (or with
	// its gateway role): provision marks pending, the index builds and
	// narrows. The remote gateway reconnects.
	sys.Close()
	sys, err = openSystem(ctx, cfg, logger, "hookgate-serve", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	g, err := openKeyIndexGateway(ctx, cfg, sys, logger, jetstream.NewPublisher(sys.conn, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if g.to.Load() != nil {
		t.Fatal("setup: not on the upgrade path")
	}
	kctx, kcancel := context.WithCancel(ctx)
	kdone := make(chan error, 1)
	go func() { kdone <- g.run(kctx) }()
	defer func() { kcancel(); <-kdone; g.close() }()
	for end := time.Now().Add(20 * time.Second); ; {
		if kept, _, err := jetstream.KeyIndexKept(ctx, sys.conn.JS); err == nil && kept {
			break
		}
		if time.Now().After(end) {
			t.Fatal("WEBHOOKS not narrowed in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-remote:
		t.Logf("remote gateway stopped after the narrowing: %v", err)
		return
	default:
	}
	// More than dedup.window later, the sender redelivers (a lost 2xx).
	time.Sleep(2 * time.Second)
	code := review6Post(t, base, body)
	s, err := sys.conn.JS.Stream(ctx, jetstream.StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	n := s.CachedInfo().State.Msgs
	if n != 1 {
		t.Fatalf("event evt_review6 stored %d times in WEBHOOKS within the horizon (redelivery answered %d by a gateway on nats.url that started before the upgrade and kept running after WEBHOOKS was narrowed to 1s and marked kept)\nremote stderr tail: %s", n, code, tail(stderr.String(), 600))
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
