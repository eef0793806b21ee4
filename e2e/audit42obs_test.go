package e2e

// Audit 42, observability: what an operator sees (/metrics, the log,
// status --json, trace KEY, AUDIT) against what happened.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/hookgate/hookgate/event"
)

const audit42ObsPlainSecret = "plain-obs-secret"

// audit42ObsPort is a free loopback port in 26000-26999 (the range this
// audit may use).
func audit42ObsPort(t testing.TB) int {
	t.Helper()
	for range 200 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 26000+rand.IntN(1000)))
		if err == nil {
			p := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port in 26000-26999")
	return 0
}

// audit42ObsEnv writes a config with an embedded server listening on
// loopback; consumerBlock and providers are YAML inserted as is (providers
// under `providers:`).
func audit42ObsEnv(t testing.TB, consumerBlock, providers string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, cfgPath: filepath.Join(dir, "hookgate.yaml")}
	port := audit42ObsPort(t)
	e.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`http:
  listen: "127.0.0.1:%d"
  max_body_bytes: 4096
nats:
  embedded:
    data_dir: %q
    listen: "127.0.0.1:%d"
    token: %q
consumer:
%s
providers:
%s
`, audit42ObsPort(t), filepath.Join(dir, "data"), port, natsToken, consumerBlock, providers)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// audit42ObsSignPlain signs body for an hmac-sha256 provider with header X-Sig.
func audit42ObsSignPlain(body []byte) http.Header {
	m := hmac.New(sha256.New, []byte(audit42ObsPlainSecret))
	m.Write(body)
	h := http.Header{}
	h.Set("X-Sig", "sha256="+hex.EncodeToString(m.Sum(nil)))
	return h
}

// audit42ObsAudit returns every AUDIT record.
func audit42ObsAudit(t testing.TB, j js.JetStream) []event.AuditRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "AUDIT")
	if err != nil {
		t.Fatalf("stream AUDIT: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.AuditRecord
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		recs, err := event.AuditRecords(m.Data)
		if err != nil {
			t.Fatalf("AUDIT seq %d: %v", seq, err)
		}
		out = append(out, recs...)
	}
	return out
}

const audit42ObsPlainProvider = `  plain:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["` + audit42ObsPlainSecret + `"] }
    event_id: ["json:/id"]
    fallback: reject
`

// A webhook over its provider's rate_limit is refused once its key is
// derived (README: "checked once the key is derived"), and its 429 is
// audited as a `rejected` record. The other rejections found after the key
// (431 headers too large, 400 value too long, 400 NATS header) name the key
// and account in their record, so `trace KEY` shows them; the 429's record
// names neither, so `trace KEY` of a rate-limited event says no event with
// that key is in AUDIT, although AUDIT holds its 429.
func TestAudit42ObsRateLimitedRecordNamesItsKey(t *testing.T) {
	e := audit42ObsEnv(t, "  workers: 2", audit42ObsPlainProvider+"    rate_limit: { per_second: 1, burst: 1 }\n")
	in := start(t, e.cfgPath)
	var limited string
	for i := range 20 {
		body := []byte(fmt.Sprintf(`{"id":"rl-%d"}`, i))
		r := post(t, in.baseURL+"/webhooks/plain", audit42ObsSignPlain(body), body)
		if r.status == http.StatusTooManyRequests {
			limited = fmt.Sprintf("plain:default:evt:rl-%d", i)
			break
		}
	}
	if limited == "" {
		t.Fatal("no 429 in 20 requests at rate_limit 1/s")
	}
	j := natsClient(t, e.natsURL, natsToken)
	var rec *event.AuditRecord
	waitFor(t, "the 429's AUDIT record", 10*time.Second, func() bool {
		for _, r := range audit42ObsAudit(t, j) {
			if r.Decision == "rejected" && r.Status == http.StatusTooManyRequests {
				rec = &r
				return true
			}
		}
		return false
	})
	tr := runHG(t, "trace", limited, "--config", e.cfgPath)
	if rec.Key != limited || rec.Account != "default" || tr.code != 0 {
		t.Fatalf("the 429 of %s is audited as key %q account %q; trace %s: exit %d: %s%s",
			limited, rec.Key, rec.Account, limited, tr.code, strings.TrimSpace(tr.stdout), strings.TrimSpace(tr.stderr))
	}
}
