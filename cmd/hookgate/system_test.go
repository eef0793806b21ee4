package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// The largest http.max_body_bytes `config check` accepts is one the
// embedded server starts with (the body plus headerRoom as its max
// payload), and the next byte is refused by the check, not by a failing
// serve. (That a body of that size is stored:
// TestReviewBFLargestBodyLimitIsStored.)
func TestLargestBodyLimitServes(t *testing.T) {
	const bodyLimit = 32<<20 - 64<<10 - 8<<10 // config's maxBodyLimit
	largest := int64(-1)
	for _, n := range []int64{bodyLimit, bodyLimit + 1} {
		cfg, err := config.Parse(fmt.Appendf(nil, "http: { max_body_bytes: %d }\nnats: { embedded: { data_dir: %q } }\n", n, t.TempDir()), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Validate() != nil {
			continue
		}
		largest = n
		s, err := openSystem(t.Context(), cfg, slog.New(slog.DiscardHandler), "test", readWrite)
		if err != nil {
			t.Fatalf("max_body_bytes %d passes the check, but: %v", n, err)
		}
		s.Close()
	}
	if largest != bodyLimit {
		t.Fatalf("largest max_body_bytes accepted: %d, want %d", largest, bodyLimit)
	}
}

// A config that cannot be read is one line naming the file; problems in
// one that can are a line each.
func TestLoadConfigErrorLines(t *testing.T) {
	_, err := loadConfig(filepath.Join(t.TempDir(), "missing.yaml"), func(string) string { return "" })
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "missing.yaml: read config") {
		t.Fatalf("missing file: %q, want one line naming it", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("http: { max_body_bytes: 0, timeouts: { read: 0s } }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadConfig(bad, func(string) string { return "" })
	if err == nil || strings.Count(err.Error(), "\n") < 2 {
		t.Fatalf("two problems: %q, want the file, then a line each", err)
	}
}

// Ready asks for what the instance's roles write to: the consumer's
// buckets only where the consumer runs (and provisions them), or a
// gateway-only instance would never be ready.
func TestReadyFollowsRoles(t *testing.T) {
	for _, consumer := range []bool{false, true} {
		t.Run(fmt.Sprint("consumer=", consumer), func(t *testing.T) {
			s := testSystem(t, fmt.Sprintf("roles: { gateway: true, consumer: %t }\n", consumer))
			err := s.Ready(t.Context()) // streams provisioned, buckets not yet
			switch {
			case !consumer && err != nil:
				t.Fatalf("gateway only: %v, want ready", err)
			case consumer && (err == nil || !strings.Contains(err.Error(), "KV_WATERMARKS")):
				t.Fatalf("with the consumer, before its buckets: %v, want not ready naming KV_WATERMARKS", err)
			}
		})
	}
}

// The stream gauges read the streams at each scrape; JetStream gone, up
// is 0 and the scrape still answers.
func TestStreamMetrics(t *testing.T) {
	s := testSystem(t, "")
	pub := jetstream.NewPublisher(s.conn, 5*time.Second)
	if _, err := pub.Publish(t.Context(), jetstream.Message{Subject: "webhooks.p.default", Key: "p:default:evt:1", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStreamCollector(s.conn))
	gauge := func(name, stream string) (float64, bool) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if stream == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == stream) {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	for _, c := range []struct {
		name, stream string
		want         float64
	}{
		{"hookgate_jetstream_up", "", 1},
		{"hookgate_stream_messages", "WEBHOOKS", 1},
		{"hookgate_stream_messages", "DLQ", 0},
		{"hookgate_stream_max_bytes", "WEBHOOKS", 10e9},
	} {
		if got, ok := gauge(c.name, c.stream); !ok || got != c.want {
			t.Errorf("%s{stream=%q} = %v (present %v), want %v", c.name, c.stream, got, ok, c.want)
		}
	}
	if got, _ := gauge("hookgate_stream_bytes", "WEBHOOKS"); got <= 0 {
		t.Errorf("hookgate_stream_bytes{stream=WEBHOOKS} = %v, want > 0", got)
	}
	s.embedded.Shutdown()
	if got, ok := gauge("hookgate_jetstream_up", ""); !ok || got != 0 {
		t.Errorf("with JetStream gone: up = %v (present %v), want 0", got, ok)
	}
}

// testSystem opens an embedded system from yaml (a data_dir of its own
// is added), closed at the end of the test.
func testSystem(t *testing.T, yaml string) *system {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, "%snats: { embedded: { data_dir: %q } }\n", yaml, t.TempDir()), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openSystem(t.Context(), cfg, slog.New(slog.DiscardHandler), "test", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// GRANTS keeps a duplicate window of dedup.window when every provider that
// publishes does so the sequenced way (watermark ordering, a template
// naming {provider}, {subject}, and {account} unless the account is a
// constant); one that does not needs the horizon-long window.
// WEBHOOKS, on the embedded server, keeps dedup.window either way: the
// gateway's key index holds the keys over the horizon (jetstream.KeyIndex).
func TestGrantsWindow(t *testing.T) {
	const (
		ordered = `a: { signature: { scheme: stripe, secrets: [x] }, subject: "json:/g", occurred_at: "json:/t" }` // watermark, default template
		none    = `b: { signature: { scheme: stripe, secrets: [x] } }`                                             // ordering none
		noSubj  = `c: { signature: { scheme: stripe, secrets: [x] }, subject: "json:/g", occurred_at: "json:/t", effects: { publish: "grants.{provider}.{type}" } }`
		quiet   = `d: { signature: { scheme: stripe, secrets: [x] }, effects: { publish: "" } }` // ordering none, publishes nothing
		// Accounts from a header: the default template (no {account})
		// shares a GRANTS subject between accounts with one subject value.
		accounts   = `e: { signature: { scheme: stripe, secrets: [x] }, subject: "json:/g", occurred_at: "json:/t", account: { header: X-Shop } }`
		perAccount = `f: { signature: { scheme: stripe, secrets: [x] }, subject: "json:/g", occurred_at: "json:/t", account: { header: X-Shop }, effects: { publish: "grants.{provider}.{account}.{subject}.{type}" } }`
	)
	for _, c := range []struct {
		name, providers string
		want            time.Duration
	}{
		{"no providers", "", 2 * time.Minute},
		{"watermark, default template", ordered, 2 * time.Minute},
		{"and one that does not publish", ordered + ", " + quiet, 2 * time.Minute},
		{"and one with ordering none", ordered + ", " + none, 96 * time.Hour},
		{"and a template without {subject}", ordered + ", " + noSubj, 96 * time.Hour},
		{"accounts from a header, default template", ordered + ", " + accounts, 96 * time.Hour},
		{"accounts from a header, a template with {account}", ordered + ", " + perAccount, 2 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testSystem(t, "providers: {"+c.providers+"}\n")
			for stream, want := range map[string]time.Duration{"GRANTS": c.want, "WEBHOOKS": s.cfg.Dedup.Window} {
				st, err := s.conn.JS.Stream(t.Context(), stream)
				if err != nil {
					t.Fatal(err)
				}
				if got := st.CachedInfo().Config.Duplicates; got != want {
					t.Errorf("%s duplicate window %s, want %s", stream, got, want)
				}
			}
		})
	}
}

// The disconnect warning of serve's connections says what their loss
// stops: the consumer's said webhooks were answered 503, which only the
// gateway's does (review BI).
func TestConnectionLostSaysWhatStops(t *testing.T) {
	for name, want := range map[string]string{
		"hookgate-serve":    "webhooks this serve takes are answered 503",
		"hookgate-consumer": "applies no event meanwhile; webhooks are not affected",
		"hookgate-cli":      "",
	} {
		if got := connectionLost(name, true); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("connectionLost(%q) = %q; want %q", name, got, want)
		}
	}
	// A serve with the gateway role off takes no webhooks.
	if got := connectionLost("hookgate-serve", false); got != "" {
		t.Errorf("connectionLost of a serve without the gateway role = %q; want nothing about webhooks", got)
	}
}
