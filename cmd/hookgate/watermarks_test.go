package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// pruneConfig: serve with its consumer on the embedded server (listening,
// so the CLI reaches it), review6's provider, and a horizon and max_age of
// seconds so marks age past the prune's bound (3 s) within the test.
func pruneConfig(t *testing.T, natsListen string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf(`http: { listen: "127.0.0.1:0" }
nats: { embedded: { data_dir: %q, listen: %q, token: tok } }
dedup: { horizon: 1s, window: 1s }
retention: { webhooks: { max_age: 2s } }
%s`, t.TempDir(), natsListen, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pruneServe runs serve on pruneConfig and connects to its embedded
// server (closed with the test).
func pruneServe(t *testing.T) (*review7Serve, string, *jetstream.Conn) {
	t.Helper()
	listen := review9gFreeAddr(t)
	cfgPath := pruneConfig(t, listen)
	s := review7Start(t, cfgPath, true)
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "prune-test", URL: "nats://" + listen, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, cfgPath, c
}

// TestWatermarksPrune: `watermarks prune` removes the marks older than
// retention.webhooks.max_age plus dedup.horizon, and keeps a mark that is
// newer, one that holds a lease (an event in doubt is settled against it)
// and one whose subject has a letter in DLQ (dlq replay re-feeds letters
// of any age). The dry run lists the same and changes nothing; the prune
// is audited; and the running serve applies the pruned subject's next
// event (its cached mark's revision is gone: it finds the entry absent,
// and GRANTS still holds the subject's earlier message).
func TestWatermarksPrune(t *testing.T) {
	s, cfgPath, c := pruneServe(t)
	ctx := t.Context()
	count := func(stream string) uint64 {
		t.Helper()
		st, err := c.JS.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); !cond(); {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 30 s\n%s", what, tail(s.stderr.String(), 2000))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	post := func(id, grant, at string) {
		t.Helper()
		if code := review6Post(t, s.base, fmt.Sprintf(`{"id":%q,"grant_id":%q,"at":%q}`, id, grant, at)); code != 200 {
			t.Fatalf("post %s: %d", id, code)
		}
	}
	for _, g := range []string{"G-1", "G-3", "G-4"} {
		post("e-"+g, g, "2026-01-01T00:00:00Z")
	}
	post("e-G-2", "G-2", "2099-01-01T00:00:00Z") // newer than any cutoff
	waitFor("four events applied", func() bool { return count(jetstream.StreamGrants) == 4 })
	post("e-G-3-bad", "G-3", "not a time")
	waitFor("G-3's bad event dead-lettered", func() bool { return count(jetstream.StreamDLQ) == 1 })
	marks, _, err := jetstream.OpenKV(ctx, c.JS, jetstream.KVConfig{Replicas: 1, Horizon: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, rev, err := marks.Get(ctx, "p.default.G-4")
	if err != nil || rev == 0 {
		t.Fatalf("G-4's mark: rev %d, %v", rev, err)
	}
	m.Lease = &consumer.Lease{Owner: "host/1/gone", Key: "p:default:evt:e-G-4-next", Until: time.Now().Add(time.Hour)}
	if _, err := marks.Put(ctx, "p.default.G-4", m, rev); err != nil {
		t.Fatal(err)
	}
	_, g1Rev, err := marks.Get(ctx, "p.default.G-1")
	if err != nil || g1Rev == 0 {
		t.Fatalf("G-1's mark: rev %d, %v", g1Rev, err)
	}

	var dry review9Result
	// G-4's lease and G-3's letter were written last: wait until only
	// G-2 (its mark in 2099) is newer than the bound.
	waitFor("the dry run to find every mark but G-2's past the bound", func() bool {
		dry = review9Run(t, "", "watermarks", "prune", "--config", cfgPath, "--dry-run")
		return dry.code == 0 && strings.Contains(dry.stdout, "would prune\tp.default.G-1\t") && strings.Contains(dry.stdout, "; kept 1 newer, ")
	})
	for _, kept := range []string{"G-2", "G-3", "G-4"} {
		if strings.Contains(dry.stdout, "p.default."+kept+"\t") {
			t.Errorf("the dry run would prune %s:\n%s", kept, dry.stdout)
		}
	}
	if want := "would prune 1 marks last written before "; !strings.Contains(dry.stdout, want) ||
		!strings.Contains(dry.stdout, "(older than 3s); kept 1 newer, 1 leased, 1 with letters in DLQ; dry run, nothing changed") {
		t.Errorf("dry run summary:\n%s", dry.stdout)
	}
	if _, rev, err := marks.Get(ctx, "p.default.G-1"); err != nil || rev != g1Rev {
		t.Fatalf("after the dry run G-1 is at rev %d (%v), want %d: the dry run changed it", rev, err, g1Rev)
	}

	r := review9Run(t, "", "watermarks", "prune", "--config", cfgPath)
	if r.code != 0 || !strings.Contains(r.stdout, "pruned\tp.default.G-1\tmark 2026-01-01T00:00:00Z\t") ||
		!strings.Contains(r.stdout, "pruned 1 marks last written before ") {
		t.Fatalf("prune: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, g := range []string{"G-2", "G-3", "G-4"} {
		if _, rev, err := marks.Get(ctx, "p.default."+g); err != nil || rev == 0 {
			t.Errorf("%s's mark after the prune: rev %d, %v; want it kept", g, rev, err)
		}
	}
	if _, rev, err := marks.Get(ctx, "p.default.G-1"); err != nil || rev != 0 {
		t.Fatalf("G-1's mark after the prune: rev %d, %v; want absent", rev, err)
	}
	var records []event.AuditRecord
	waitFor("the prune's AUDIT record", func() bool {
		records = nil
		err := jetstream.Read(ctx, c, jetstream.StreamAudit, jetstream.Range{Filter: "audit." + event.DecisionWatermarkPruned + ".p"}, func(m jetstream.StoredMsg, _ uint64) error {
			rs, err := event.AuditRecords(m.Body)
			records = append(records, rs...)
			return err
		})
		return err == nil && len(records) > 0
	})
	if rec := records[0]; len(records) != 1 || rec.Actor != event.ActorOperator || rec.Account != "default" || !strings.Contains(rec.Reason, "watermark p.default.G-1 (mark 2026-01-01T00:00:00Z") {
		t.Errorf("AUDIT records of the prune: %+v", records)
	}

	// The running serve cached G-1's mark at the pruned revision.
	post("e-G-1-next", "G-1", "2026-01-02T00:00:00Z")
	waitFor("G-1's next event applied", func() bool { return count(jetstream.StreamGrants) == 5 })
	if m, rev, err := marks.Get(ctx, "p.default.G-1"); err != nil || rev == 0 || !m.At.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("G-1's mark after its next event: %+v rev %d, %v", m, rev, err)
	}

	r = review9Run(t, "", "watermarks", "prune", "--config", cfgPath, "--older-than", "2s")
	if r.code != 1 || !strings.Contains(r.stderr, "--older-than 2s is less than retention.webhooks.max_age (2s) plus dedup.horizon (1s), 3s") {
		t.Errorf("--older-than under the bound: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A --provider neither in the config nor on any mark: a typo, refused
	// (it answered "would prune 0 marks", exit 0); the config's own
	// provider filters.
	r = review9Run(t, "", "watermarks", "prune", "--config", cfgPath, "--dry-run", "--provider", "pp")
	if r.code != 1 || !strings.Contains(r.stderr, `--provider "pp" is not in the config and no mark in WATERMARKS has it`) {
		t.Errorf("prune --provider pp (a typo): exit %d, want 1 naming it\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = review9Run(t, "", "watermarks", "prune", "--config", cfgPath, "--dry-run", "--provider", "p"); r.code != 0 {
		t.Errorf("prune --provider p: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A watermark-pruned record that does not reach AUDIT (here AUDIT is
// gone) is the only trace of a removal that cannot be undone: the prune
// says how many were lost and exits 1, though the marks are pruned.
func TestWatermarksPruneLostAuditIsAFailure(t *testing.T) {
	cfgPath := pruneConfig(t, "")
	sys := review9Open(t, cfgPath)
	marks, _, err := jetstream.OpenKV(t.Context(), sys.conn.JS, jetstream.KVConfig{Replicas: 1, Horizon: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := marks.Put(t.Context(), "p.default.G-1", consumer.Mark{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := sys.conn.JS.DeleteStream(t.Context(), jetstream.StreamAudit); err != nil {
		t.Fatal(err)
	}
	sys.Close()
	for end := time.Now().Add(30 * time.Second); ; {
		dry := review9Run(t, "", "watermarks", "prune", "--config", cfgPath, "--dry-run")
		if strings.Contains(dry.stdout, "would prune\tp.default.G-1\t") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the dry run did not find G-1 past the bound within 30 s:\n%s%s", dry.stdout, dry.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := review9Run(t, "", "watermarks", "prune", "--config", cfgPath)
	if r.code != 1 || !strings.Contains(r.stdout, "pruned\tp.default.G-1\t") ||
		!strings.Contains(r.stderr, "1 watermark-pruned records were not written to AUDIT") {
		t.Fatalf("prune with AUDIT gone: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// On a data_dir no consuming serve has run on, prune says there is
// nothing to prune (exit 0) instead of failing on a missing stream.
func TestWatermarksPruneBeforeAnyConsumer(t *testing.T) {
	cfgPath := pruneConfig(t, "")
	sys := review9Open(t, cfgPath) // the streams; review9Open provisions the buckets too
	if err := sys.conn.JS.DeleteKeyValue(t.Context(), jetstream.BucketMarks); err != nil {
		t.Fatal(err)
	}
	if err := sys.conn.JS.DeleteStream(t.Context(), jetstream.StreamDLQ); err != nil {
		t.Fatal(err)
	}
	sys.Close()
	r := review9Run(t, "", "watermarks", "prune", "--config", cfgPath, "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "no WATERMARKS bucket here yet") {
		t.Fatalf("prune before any consumer: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
