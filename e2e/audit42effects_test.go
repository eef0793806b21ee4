package e2e

// Audit 42, effects: what the consumer does with each event (forward,
// publish, retries, dead letters), through the real binary.
//
// Each test below was written, failing, against the code before its fix, and
// its comment tells the defect as the audit found it: all are fixed since
// (stop 42), and the tests hold the fixes.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// audit42Listen listens on a free loopback port in 22000-22999 (the range
// this audit may use).
func audit42Listen(t testing.TB) net.Listener {
	t.Helper()
	for range 200 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 22000+rand.IntN(1000)))
		if err == nil {
			return ln
		}
	}
	t.Fatal("no free port in 22000-22999")
	return nil
}

// audit42Receiver is a forward receiver that records every POST by its
// Idempotency-Key and answers as handle says.
type audit42Receiver struct {
	url    string
	mu     sync.Mutex
	posts  map[string][]time.Time
	bodies map[string][]string
	header map[string]http.Header
}

func newAudit42Receiver(t testing.TB, handle func(w http.ResponseWriter, req *http.Request, body []byte, n int)) *audit42Receiver {
	t.Helper()
	r := &audit42Receiver{posts: map[string][]time.Time{}, bodies: map[string][]string{}, header: map[string]http.Header{}}
	ln := audit42Listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		key := req.Header.Get("Idempotency-Key")
		r.mu.Lock()
		r.posts[key] = append(r.posts[key], time.Now())
		r.bodies[key] = append(r.bodies[key], string(body))
		r.header[key] = req.Header.Clone()
		n := len(r.posts[key])
		r.mu.Unlock()
		handle(w, req, body, n)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = "http://" + ln.Addr().String() + "/hook"
	return r
}

// audit42Env writes a config with one standard-webhooks provider "grants"
// whose events are forwarded to forwardURL; consumerBlock and
// providerExtra are YAML inserted as is.
func audit42Env(t testing.TB, consumerBlock, providerExtra string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, cfgPath: filepath.Join(dir, "hookgate.yaml")}
	ln := audit42Listen(t)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	e.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	httpLn := audit42Listen(t)
	httpAddr := httpLn.Addr().String()
	httpLn.Close()
	cfg := fmt.Sprintf(`http:
  listen: %q
nats:
  embedded:
    data_dir: %q
    listen: "127.0.0.1:%d"
    token: %q
consumer:
%s
providers:
  grants:
    signature: { scheme: standard-webhooks, secrets: [%q] }
    event_id: ["header:webhook-id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    type: "json:/type"
%s
`, httpAddr, filepath.Join(dir, "data"), port, natsToken, consumerBlock, grantsSecret, providerExtra)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// audit42Letters returns the DLQ letters' headers.
func audit42Letters(t testing.TB, j js.JetStream) []map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "DLQ")
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil
	}
	var out []map[string]string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		h := map[string]string{"body": string(m.Data)}
		for k := range m.Header {
			h[k] = m.Header.Get(k)
		}
		out = append(out, h)
	}
	return out
}

func audit42Send(t testing.TB, base, id, body string) {
	t.Helper()
	expect(t, post(t, base+"/webhooks/grants", signGrants(t, id, []byte(body)), []byte(body)), 200, "status", "accepted")
}

// A receiver that hangs up without answering (it crashed mid-request, a
// proxy reset) is a connection error: retried after consumer.backoff, and
// consumer.max_deliver bounds the attempts, so it bounds the POSTs the
// receiver sees: exactly max_deliver here. net/http replayed a request
// carrying Idempotency-Key at once, without backoff, when it failed on a
// reused keep-alive connection: the receiver got more POSTs of the event
// than max_deliver, two of them back to back (Forward.header).
func TestAudit42EffectsHangUpPostsBeyondMaxDeliver(t *testing.T) {
	recv := newAudit42Receiver(t, func(w http.ResponseWriter, req *http.Request, body []byte, n int) {
		if strings.Contains(string(body), "hangup") {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e := audit42Env(t, "  max_deliver: 2\n  backoff: [300ms]", fmt.Sprintf("    effects:\n      forward: { url: %q, timeout: 5s }", recv.url))
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)

	// A first event leaves a keep-alive connection in the forward's pool.
	audit42Send(t, hg.baseURL, "warm", `{"grant_id":"G-1","type":"t","occurred_at":"2026-11-30T10:00:00Z"}`)
	waitFor(t, "the first event forwarded", 30*time.Second, func() bool { return len(grantsKeys(t, j)) == 1 })

	audit42Send(t, hg.baseURL, "hang", `{"grant_id":"G-2","type":"t","occurred_at":"2026-11-30T10:00:00Z","x":"hangup"}`)
	waitFor(t, "the hung-up event dead-lettered", 30*time.Second, func() bool { return len(audit42Letters(t, j)) == 1 })
	l := audit42Letters(t, j)[0]
	key := "grants:default:evt:hang"
	recv.mu.Lock()
	times := recv.posts[key]
	recv.mu.Unlock()
	var gaps []string
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]).Round(time.Millisecond).String())
	}
	if len(times) != 2 {
		t.Fatalf("max_deliver 2 (letter: Hookgate-Dlq-Deliveries %s), but the receiver got %d POSTs of %s, gaps %v (backoff 300ms)",
			l["Hookgate-Dlq-Deliveries"], len(times), key, gaps)
	}
}

// The publish template grants.{provider}.{subject}.{type} puts every
// event of a provider under grants.<provider>.>, the natural filter of a
// downstream service that wants one provider's events. When the encoded
// subject and type make the GRANTS subject too long for NATS, hookgate
// hashes it, but into the template's literal start only
// ("grants.=H<sha256>"): the provider token, a short safe value, is
// dropped too (the WATERMARKS key of the same event keeps it:
// "<provider>.=H<sha256>"), so a subscriber of grants.grants.> never
// sees that applied event.
func TestAudit42EffectsLongValuesLeaveTheProvidersGrantsSubjects(t *testing.T) {
	e := audit42Env(t, "  max_deliver: 2\n  backoff: [300ms]", "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)

	subject := strings.Repeat("é", 500) // 1000 bytes, 3000 once encoded
	typ := strings.Repeat(".", 1000)    // 1001 empty levels, 2001 bytes
	audit42Send(t, hg.baseURL, "long", `{"grant_id":"`+subject+`","type":"`+typ+`","occurred_at":"2026-11-30T10:00:00Z"}`)
	var g []string
	waitFor(t, "the event in GRANTS", 30*time.Second, func() bool {
		g = grantsKeys(t, j)
		return len(g) == 1
	})
	if !strings.HasPrefix(g[0], "grants.grants.") {
		t.Fatalf("GRANTS message %.90q...: not under grants.grants.> (the provider's subjects per the template grants.{provider}.{subject}.{type})", g[0])
	}
}
