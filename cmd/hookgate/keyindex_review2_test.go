package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

// The README's way to scale: "run the consumer on its own machine
// (roles)", i.e. a consumer-only serve whose nats.url is the embedded
// server's listen address. That instance provisions the streams with
// KeyIndex = (nats.url == "") = false, so it sets WEBHOOKS's duplicate
// window to the whole horizon on the embedded server whose gateway keeps
// a key index for exactly that reason: the server's map of ids grows to
// the horizon (~150-180 B a key, GBs at 96 h), and the embedded server's
// restarts rebuild it by reading every event of the horizon (the ~60 s
// startup the index removes). Each restart of either side flips the
// window back and forth. (With the roles the other way round, an
// embedded consumer-only serve restarting sets 2 m under a remote
// gateway that keeps no index: keys repeat after 2 m.)
func TestReviewRemoteConsumerKeepsTheEmbeddedWebhooksWindow(t *testing.T) {
	addr := freeAddr(t)
	parse := func(yaml string) *config.Config {
		cfg, err := config.Parse([]byte(yaml), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("config check: %v", err)
		}
		return cfg
	}
	embedded := parse(fmt.Sprintf("roles: { gateway: true, consumer: false }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n", t.TempDir(), addr))
	s, err := openSystem(t.Context(), embedded, slog.New(slog.DiscardHandler), "embedded-serve", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	window := func() string {
		st, err := s.conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.Duplicates.String()
	}
	before := window()

	remote := parse(fmt.Sprintf("roles: { gateway: false, consumer: true }\nnats: { url: \"nats://tok@%s\" }\n", addr))
	r, err := openSystem(t.Context(), remote, slog.New(slog.DiscardHandler), "remote-consumer", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if after := window(); after != before {
		t.Fatalf("a consumer-only serve attached to the embedded server changed WEBHOOKS's duplicate window from %s (dedup.window, the key index holds the horizon) to %s", before, after)
	}
}

// A gateway (serve with the gateway role) pointed by nats.url at an
// embedded hookgate whose gateway keeps a key index refuses to start: it
// would not know the keys older than dedup.window.
func TestServeGatewayRefusesAnEmbeddedServersKeyIndexedWebhooks(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := config.Parse(fmt.Appendf(nil, "nats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n", t.TempDir(), addr), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openSystem(t.Context(), cfg, slog.New(slog.DiscardHandler), "embedded-serve", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(t.TempDir(), "remote.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { url: \"nats://tok@%s\" }\n", addr)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"serve", "--config", path}, func(string) string { return "" }, nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "roles: { gateway: false }") {
		t.Fatalf("serve with the gateway role on a key-indexed WEBHOOKS: %v, want a refusal naming roles\n%s", err, stdout.String())
	}
}
