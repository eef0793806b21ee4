package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestReviewAONatsURLPasswordNeverShown: a nats.url with user:password
// (accepted, and refused) never shows the password in serve's debug log,
// /metrics, /readyz, status (text, JSON), dlq list, trace or config check.
// Holds.
func TestReviewAONatsURLPasswordNeverShown(t *testing.T) {
	const pw = "AOnatsPassw0rdXYZ"
	srv := reviewTNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Users: []*server.User{{Username: "hgu", Password: pw}}})
	fwd, failing := aoReceiver(t)
	failing.Store(400)
	for _, tc := range []struct{ name, pass string }{{"right", pw}, {"wrong", pw + "bad"}} {
		t.Run(tc.name, func(t *testing.T) {
			url := fmt.Sprintf("nats://hgu:%s@%s", tc.pass, strings.TrimPrefix(srv.ClientURL(), "nats://"))
			path := filepath.Join(t.TempDir(), "hookgate.yaml")
			yaml := fmt.Sprintf(`http: { listen: "127.0.0.1:0" }
log: { level: debug }
nats: { url: %q }
consumer: { max_deliver: 2, backoff: [100ms] }
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["${AO_SECRET}"] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
    effects:
      forward: { url: %q, timeout: 2s }
`, url, fwd.URL)
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			outputs := map[string]string{}
			if tc.name == "right" {
				s := aoStart(t, path)
				aoPost(t, s.base, aoSecret, aoEvent("e1", "G-1", 10))
				aoWaitMetrics(t, s.base, "dead letter", func(b string) bool {
					return strings.Contains(b, `hookgate_stream_messages{stream="DLQ"} 1`)
				})
				_, outputs["/metrics"] = reviewMGet(s.base, "/metrics")
				_, outputs["/readyz"] = reviewMGet(s.base, "/readyz")
				for _, args := range [][]string{{"status", "--config", path}, {"status", "--json", "--config", path}, {"dlq", "list", "--config", path}, {"trace", "p:default:evt:e1", "--config", path}, {"config", "check", path}} {
					code, out, errb := aoRun(t, args...)
					outputs[strings.Join(args[:2], " ")] = fmt.Sprintf("exit %d\n%s%s", code, out, errb)
				}
				s.stop(t)
				outputs["serve"] = s.stdout.String() + s.stderr.String()
			} else {
				s := aoStart2(t, path)
				time.Sleep(3 * time.Second)
				_, outputs["/metrics"] = reviewMGet(s.base, "/metrics")
				_, outputs["/readyz"] = reviewMGet(s.base, "/readyz")
				for _, args := range [][]string{{"status", "--config", path}, {"status", "--json", "--config", path}} {
					code, out, errb := aoRun(t, args...)
					outputs[strings.Join(args[:2], " ")] = fmt.Sprintf("exit %d\n%s%s", code, out, errb)
				}
				s.stop(t)
				outputs["serve"] = s.stdout.String() + s.stderr.String()
			}
			for where, out := range outputs {
				if i := strings.Index(out, tc.pass); i >= 0 {
					t.Errorf("%s shows the NATS password: ...%s...", where, out[max(i-200, 0):min(i+len(pw)+50, len(out))])
				}
			}
		})
	}
}

// aoStart2 starts serve and waits for its "listening while starting" base.
func aoStart2(t *testing.T, cfgPath string) *review7Serve {
	ctx, cancel := context.WithCancel(context.Background())
	s := &review7Serve{cfgPath: cfgPath, stdout: &lockedBuf{}, stderr: &lockedBuf{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- run(ctx, []string{"serve", "--config", cfgPath}, aoEnv, nil, s.stdout, s.stderr)
	}()
	t.Cleanup(func() { s.stop(t) })
	s.base = review10aStartingBase(t, s)
	return s
}
