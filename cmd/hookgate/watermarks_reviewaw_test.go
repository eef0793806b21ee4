package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats.go"
)

// reviewAWConfigs writes two configs on one data_dir and listen address:
// serve's, whose WEBHOOKS keeps events for serveMaxAge, and an operator's
// copy edited for the next rollout, with max_age 2s (so its own bound is
// 3 s with the 1 s horizon).
func reviewAWConfigs(t *testing.T, listen, serveMaxAge string) (serveCfg, cliCfg string) {
	t.Helper()
	dir, data := t.TempDir(), t.TempDir()
	write := func(name, maxAge string) string {
		path := filepath.Join(dir, name)
		yaml := fmt.Sprintf(`http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q, listen: %q, token: tok } }
dedup: { horizon: 1s, window: 1s }
retention: { webhooks: { max_age: %s } }
%s`, data, listen, maxAge, review6Provider)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("serve.yaml", serveMaxAge), write("cli.yaml", "2s")
}

// TestReviewAWPruneBoundIsTheServers: the prune's bound is
// retention.webhooks.max_age + dedup.horizon of the config FILE it is
// given, but the operator commands' configs may be copies edited for the
// next rollout (system.go, readOnly). serve's WEBHOOKS keeps events for
// 1h here; with a copy saying 2s the prune removed a mark whose subject's
// events WEBHOOKS still holds (a replay of one judged stale would then
// apply, after the newer one). Expected: the bound is at least what the
// server keeps (WEBHOOKS' MaxAge, APPLIED's TTL), so the mark stays, and
// an --older-than under it is refused naming WEBHOOKS.
func TestReviewAWPruneBoundIsTheServers(t *testing.T) {
	listen := review9gFreeAddr(t)
	serveCfg, cliCfg := reviewAWConfigs(t, listen, "1h")
	s := review7Start(t, serveCfg, true)
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "prune-test", URL: "nats://" + listen, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := t.Context()
	if code := review6Post(t, s.base, `{"id":"e-1","grant_id":"G-1","at":"2026-01-02T00:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	if code := review6Post(t, s.base, `{"id":"e-0","grant_id":"G-1","at":"2026-01-01T00:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	var written time.Time
	var rev uint64
	for end := time.Now().Add(30 * time.Second); ; {
		var e jetstream.MarkEntry
		_ = jetstream.ReadMarks(ctx, c, "p", func(m jetstream.MarkEntry) error { e = m; return nil })
		if e.Key == "p.default.G-1" && e.Mark.Lease == nil && !e.Mark.At.IsZero() {
			written, rev = e.Written, e.Rev
			break
		}
		if time.Now().After(end) {
			t.Fatalf("G-1's mark not committed within 30 s\n%s", tail(s.stderr.String(), 2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Past the copy's bound (3 s), far within serve's (1h1s).
	for time.Since(written) < 4*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	r := review9Run(t, "", "watermarks", "prune", "--config", cliCfg)
	marks, _, err := jetstream.OpenKV(ctx, c.JS, jetstream.KVConfig{Replicas: 1, Horizon: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err := marks.Get(ctx, "p.default.G-1"); err != nil || got != rev {
		t.Fatalf("G-1's mark after a prune with a config saying max_age 2s while WEBHOOKS keeps 1h: rev %d (%v), want %d kept\nexit %d\n%s%s",
			got, err, rev, r.code, r.stdout, r.stderr)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "WEBHOOKS") {
		t.Errorf("prune with the copy: exit %d, want 0 and a warning naming WEBHOOKS' max_age\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = review9Run(t, "", "watermarks", "prune", "--config", cliCfg, "--older-than", "3s")
	if r.code != 1 || !strings.Contains(r.stderr, "WEBHOOKS") {
		t.Errorf("--older-than 3s under serve's bound: exit %d, want 1 naming WEBHOOKS\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, got, err := marks.Get(ctx, "p.default.G-1"); err != nil || got != rev {
		t.Fatalf("G-1's mark after --older-than 3s: rev %d (%v), want %d kept", got, err, rev)
	}
}

// TestReviewAWPruneInterruptedMidPurgeIsAudited: an interrupt (Ctrl-C, or
// the operator commands' 10 minutes, which a long prune reaches while
// almost all its time is in purge requests) that comes while a purge is in
// flight cut the request short: the server purged the mark, but the prune
// took it for an error, wrote no watermark-pruned record and did not count
// it ("stopped after 0"). Expected: every mark gone has its AUDIT record,
// and the count says so.
func TestReviewAWPruneInterruptedMidPurgeIsAudited(t *testing.T) {
	s, cfgPath, c := pruneServe(t)
	ctx := t.Context()
	const n = 12
	for i := range n {
		if code := review6Post(t, s.base, fmt.Sprintf(`{"id":"e-%d","grant_id":"G-%d","at":"2026-01-01T00:00:00Z"}`, i, i)); code != 200 {
			t.Fatalf("post: %d", code)
		}
	}
	var last time.Time
	for end := time.Now().Add(30 * time.Second); ; {
		done := 0
		_ = jetstream.ReadMarks(ctx, c, "p", func(m jetstream.MarkEntry) error {
			if m.Mark.Lease == nil && !m.Mark.At.IsZero() {
				done++
				last = m.Written
			}
			return nil
		})
		if done == n {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("marks not committed within 30 s\n%s", tail(s.stderr.String(), 2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for time.Since(last) < 4*time.Second { // past the bound, 3 s
		time.Sleep(50 * time.Millisecond)
	}

	marks, _, err := jetstream.OpenKV(ctx, c.JS, jetstream.KVConfig{Replicas: 1, Horizon: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Rounds of a prune interrupted as its first purge request is sent:
	// whether the answer or the interrupt is seen first is a race, so a
	// round at a time until every mark is gone.
	for round := 1; ; round++ {
		runCtx, cancel := context.WithCancel(ctx)
		sub, err := c.NC.Subscribe("$JS.API.STREAM.PURGE.KV_"+jetstream.BucketMarks, func(*nats.Msg) { cancel() })
		if err != nil {
			t.Fatal(err)
		}
		if err := c.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		err = run(runCtx, []string{"watermarks", "prune", "--config", cfgPath}, func(string) string { return "" }, nil, &out, &errb)
		_ = sub.Unsubscribe()
		cancel()
		code := exitCode(err, &errb)

		gone := 0
		for i := range n {
			if _, rev, err := marks.Get(ctx, fmt.Sprintf("p.default.G-%d", i)); err != nil {
				t.Fatal(err)
			} else if rev == 0 {
				gone++
			}
		}
		// The prune returned after its AUDIT writer flushed.
		audited := 0
		if err := jetstream.Read(ctx, c, jetstream.StreamAudit, jetstream.Range{Filter: "audit." + event.DecisionWatermarkPruned + ".p"}, func(m jetstream.StoredMsg, _ uint64) error {
			rs, err := event.AuditRecords(m.Body)
			audited += len(rs)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if audited != gone {
			t.Fatalf("round %d: %d marks gone, %d watermark-pruned records; exit %d\n%s%s", round, gone, audited, code, out.String(), errb.String())
		}
		if gone == n {
			return
		}
		if code != 1 || !strings.Contains(errb.String(), "stopped after ") {
			t.Fatalf("round %d: exit %d, want 1 saying where it stopped\n%s%s", round, code, out.String(), errb.String())
		}
	}
}
