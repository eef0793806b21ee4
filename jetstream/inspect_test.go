package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// store publishes one event the way the gateway does and returns its
// WEBHOOKS sequence.
func store(t *testing.T, c *jetstream.Conn, provider, account, accountInKey, key, subject string) uint64 {
	t.Helper()
	h := nats.Header{}
	h.Set(event.HeaderKey, key)
	h.Set(event.HeaderProvider, provider)
	h.Set(event.HeaderAccount, account)
	h.Set(event.HeaderReceivedAt, time.Now().UTC().Format(time.RFC3339Nano))
	h.Set(event.HeaderSubject, subject)
	h.Set(event.HeaderType, "award.disbursed")
	h.Set(event.HeaderOccurredAt, "2026-11-30T10:00:00Z")
	res, err := jetstream.NewPublisher(c, 5*time.Second).Publish(t.Context(), jetstream.Message{
		Subject: event.WebhookSubject(provider, accountInKey), Key: key, Header: h, Body: []byte(`{"grant_id":"` + subject + `"}`),
	})
	if err != nil || res.Duplicate {
		t.Fatalf("publish %s = %+v, %v", key, res, err)
	}
	return res.Seq
}

// audit writes records through the real AuditWriter and waits for them.
func audit(t *testing.T, c *jetstream.Conn, recs ...event.AuditRecord) {
	t.Helper()
	w := jetstream.NewAuditWriter(c, slog.New(slog.NewTextHandler(io.Discard, nil)), 64, nil)
	// Queued before Run, so they are packed the same way every time: one
	// message per subject, in the order subjects first appear.
	for _, r := range recs {
		w.Record(r)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	cancel()
	if err := <-done; err != nil || w.Failed() > 0 {
		t.Fatalf("audit writer: %v, %d failed", err, w.Failed())
	}
}

func storedEvent(t *testing.T, c *jetstream.Conn, seq uint64) consumer.Event {
	t.Helper()
	m, err := jetstream.GetMsg(t.Context(), c, jetstream.StreamWebhooks, seq)
	if err != nil {
		t.Fatal(err)
	}
	return jetstream.EventFromMsg(m.Header, m.Body, m.Seq)
}

func TestInspectStatusMissingIsNotAnError(t *testing.T) {
	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: t.TempDir(), MaxPayload: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: t.Name(), Embedded: e})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	st, err := jetstream.ReadStatus(t.Context(), c, jetstream.StatusOptions{Horizon: time.Hour})
	if err != nil {
		t.Fatalf("ReadStatus on an empty server: %v", err)
	}
	var names []string
	for _, s := range st.Streams {
		names = append(names, s.Name)
		if s.Exists {
			t.Errorf("stream %s exists on a fresh server", s.Name)
		}
	}
	if got := strings.Join(names, ","); got != "WEBHOOKS,GRANTS,DLQ,AUDIT" {
		t.Errorf("streams = %s", got)
	}
	for _, b := range st.Buckets {
		if b.Exists {
			t.Errorf("bucket %s exists on a fresh server", b.Name)
		}
	}
	if len(st.Consumers) != 1 || st.Consumers[0].Name != jetstream.DurableApply || st.Consumers[0].Exists {
		t.Errorf("consumers = %+v; want %s, missing", st.Consumers, jetstream.DurableApply)
	}
	if !st.Dedup.Known || st.Dedup.StoreSize != 0 {
		t.Errorf("dedup = %+v; want known, 0", st.Dedup)
	}

	r, err := jetstream.Trace(t.Context(), c, jetstream.TraceQuery{Key: "grants:default:evt:x"})
	if err != nil {
		t.Fatalf("Trace on an empty server: %v", err)
	}
	if r.Found() || r.Applied.BucketExists {
		t.Errorf("trace on an empty server = %+v", r)
	}
	for _, s := range r.Scans {
		if s.Exists {
			t.Errorf("scan %+v: stream exists on a fresh server", s)
		}
	}
}

func TestInspectStatusCounts(t *testing.T) {
	env := jstest.Start(t, "")
	c, ctx := env.Conn, t.Context()

	keys := []string{"grants:default:evt:1", "grants:default:evt:2", "grants:default:evt:3", "portal:acme:evt:4"}
	var seqs []uint64
	for i, k := range keys {
		provider, account, _ := jetstream.SplitKey(k)
		seqs = append(seqs, store(t, c, provider, account, account, k, []string{"G-1", "G-1", "G-2", "G-3"}[i]))
	}
	// A duplicate stores nothing.
	if res, err := jetstream.NewPublisher(c, time.Second).Publish(ctx, jetstream.Message{Subject: "webhooks.grants.default", Key: keys[0]}); err != nil || !res.Duplicate {
		t.Fatalf("duplicate publish = %+v, %v", res, err)
	}
	fx := jetstream.NewEffects(c)
	for _, seq := range seqs[:2] {
		ev := storedEvent(t, c, seq)
		if _, err := fx.PublishGrant(ctx, "grants.grants.G-1.award.disbursed", ev.Key, ev.Header, ev.Body); err != nil {
			t.Fatal(err)
		}
		if err := env.Applied.Remember(ctx, ev.Key); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range seqs[2:] {
		if _, err := fx.DeadLetter(ctx, storedEvent(t, c, seq), "forward: 400 Bad Request", 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Marks.Put(ctx, "grants.default.G-1", consumer.Mark{At: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	// The durable consumer, created but not pulling: everything pending.
	if _, err := c.JS.CreateOrUpdateConsumer(ctx, jetstream.StreamWebhooks, js.ConsumerConfig{Durable: jetstream.DurableApply, AckPolicy: js.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	// A downstream durable on GRANTS is listed too; an ephemeral is not.
	if _, err := c.JS.CreateOrUpdateConsumer(ctx, jetstream.StreamGrants, js.ConsumerConfig{Durable: "billing", AckPolicy: js.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.CreateConsumer(ctx, jetstream.StreamGrants, js.ConsumerConfig{AckPolicy: js.AckNonePolicy, InactiveThreshold: time.Minute}); err != nil {
		t.Fatal(err)
	}

	st, err := jetstream.ReadStatus(ctx, c, jetstream.StatusOptions{Horizon: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{"WEBHOOKS": 4, "GRANTS": 2, "DLQ": 2, "AUDIT": 0} {
		s := st.Stream(name)
		if !s.Exists || s.Messages != want {
			t.Errorf("%s: exists %v, %d messages; want %d", name, s.Exists, s.Messages, want)
		}
		if pct, ok := s.DiskUse(); !ok || (want > 0) != (pct > 0) || s.MaxBytes != 1<<30 || s.MaxAge != 24*time.Hour {
			t.Errorf("%s: disk use %v %v, limits %d %s", name, pct, ok, s.MaxBytes, s.MaxAge)
		}
	}
	if w := st.Stream("WEBHOOKS"); w.FirstTime.IsZero() || w.LastTime.Before(w.FirstTime) || w.FirstSeq != 1 || w.LastSeq != 4 {
		t.Errorf("WEBHOOKS range = %+v", w)
	}
	if b := st.Bucket(jetstream.BucketMarks); !b.Exists || b.Values != 1 {
		t.Errorf("WATERMARKS = %+v; want 1 value", b)
	}
	if b := st.Bucket(jetstream.BucketApplied); !b.Exists || b.Values != 2 || b.TTL != time.Hour {
		t.Errorf("APPLIED = %+v; want 2 values, ttl 1h", b)
	}
	var names []string
	for _, cs := range st.Consumers {
		names = append(names, cs.Stream+"/"+cs.Name)
	}
	if got := strings.Join(names, ","); got != "WEBHOOKS/hookgate-apply,GRANTS/billing" {
		t.Errorf("consumers = %s", got)
	}
	if a := st.Consumers[0]; !a.Exists || a.NumPending != 4 || a.NumAckPending != 0 || a.Delivered.StreamSeq != 0 {
		t.Errorf("apply consumer = %+v; want 4 pending", a)
	}
	if b := st.Consumers[1]; b.NumPending != 2 {
		t.Errorf("billing consumer = %+v; want 2 pending", b)
	}
	if st.DLQByProvider["grants"] != 1 || st.DLQByProvider["portal"] != 1 || len(st.DLQByProvider) != 2 {
		t.Errorf("DLQ by provider = %v", st.DLQByProvider)
	}
	if d := st.Dedup; !d.Known || d.StoreSize != 4 || d.FirstSeq != 1 || d.Window != time.Hour {
		t.Errorf("dedup = %+v; want 4 keys from seq 1, window 1h", d)
	}

	// The horizon counts back from now: with "now" set so that the
	// horizon began at the third message, two keys are held.
	third, err := jetstream.GetMsg(ctx, c, jetstream.StreamWebhooks, seqs[2])
	if err != nil {
		t.Fatal(err)
	}
	st, err = jetstream.ReadStatus(ctx, c, jetstream.StatusOptions{Horizon: time.Hour, Now: third.Time.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Dedup; !d.Known || d.FirstSeq != seqs[2] || d.StoreSize != 2 {
		t.Errorf("dedup since the third message = %+v; want first seq %d, 2 keys", d, seqs[2])
	}
	st, err = jetstream.ReadStatus(ctx, c, jetstream.StatusOptions{Horizon: time.Hour, Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Dedup; !d.Known || d.FirstSeq != 0 || d.StoreSize != 0 {
		t.Errorf("dedup with every message older than the horizon = %+v; want 0", d)
	}
}

func TestInspectTrace(t *testing.T) {
	env := jstest.Start(t, "")
	c, ctx := env.Conn, t.Context()
	const key = "grants:default:evt:msg_1"

	other := store(t, c, "grants", "default", "default", "grants:default:evt:other", "G-1")
	seq := store(t, c, "grants", "default", "default", key, "G-1")
	ev := storedEvent(t, c, seq)
	fx := jetstream.NewEffects(c)
	if _, err := fx.PublishGrant(ctx, "grants.grants.G-1.award.disbursed", "grants:default:evt:other", storedEvent(t, c, other).Header, nil); err != nil {
		t.Fatal(err)
	}
	grantSeq, err := fx.PublishGrant(ctx, "grants.grants.G-1.award.disbursed", key, ev.Header, ev.Body)
	if err != nil {
		t.Fatal(err)
	}
	letterSeq, err := fx.DeadLetter(ctx, ev, "forward: 500 Internal Server Error", 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Applied.Remember(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Marks.Put(ctx, "grants.default.G-1", consumer.Mark{At: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Keys: []string{key}}, 0); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	audit(t, c,
		event.AuditRecord{Time: t0, Decision: event.DecisionAccepted, Provider: "grants", Account: "default", Key: key, Seq: seq, Status: http.StatusOK, Actor: event.ActorGateway},
		event.AuditRecord{Time: t0, Decision: event.DecisionAccepted, Provider: "grants", Account: "default", Key: "grants:default:evt:other", Seq: other, Status: http.StatusOK, Actor: event.ActorGateway},
		event.AuditRecord{Time: t0.Add(time.Millisecond), Decision: event.DecisionDuplicate, Provider: "grants", Account: "default", Key: key, Seq: seq, Status: http.StatusOK, Actor: event.ActorGateway},
		event.AuditRecord{Time: t0.Add(2 * time.Millisecond), Decision: event.DecisionApplied, Provider: "grants", Account: "default", Key: key, Seq: seq, Actor: event.ActorConsumer},
		// Another provider's record of the same key text is not read.
		event.AuditRecord{Time: t0, Decision: event.DecisionAccepted, Provider: "portal", Key: key, Actor: event.ActorGateway},
	)

	r, err := jetstream.Trace(ctx, c, jetstream.TraceQuery{Key: key, GrantsFilter: "grants.grants.>"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Found() || r.Provider != "grants" || r.Account != "default" {
		t.Fatalf("report = %+v", r)
	}
	if len(r.Stored) != 1 || r.Stored[0].Seq != seq || r.Stored[0].Subject != "webhooks.grants.default" || r.Stored[0].EventSubject != "G-1" || r.Stored[0].ReceivedAt.IsZero() {
		t.Errorf("stored = %+v; want seq %d on webhooks.grants.default", r.Stored, seq)
	}
	var decisions []string
	for _, a := range r.Audit {
		decisions = append(decisions, a.Decision+"/"+a.Actor)
		if a.Seq != seq {
			t.Errorf("audit record %+v: seq %d, want %d", a, a.Seq, seq)
		}
	}
	if got := strings.Join(decisions, ","); got != "accepted/gateway,duplicate/gateway,applied/consumer" {
		t.Errorf("audit = %s", got)
	}
	if len(r.Grants) != 1 || r.Grants[0].Seq != grantSeq || r.Grants[0].Subject != "grants.grants.G-1.award.disbursed" {
		t.Errorf("grants = %+v; want seq %d", r.Grants, grantSeq)
	}
	if len(r.Letters) != 1 || r.Letters[0].Seq != letterSeq || r.Letters[0].Deliveries != 8 || r.Letters[0].StoredSeq != seq || !strings.Contains(r.Letters[0].Reason, "500") {
		t.Errorf("letters = %+v", r.Letters)
	}
	if !r.Applied.BucketExists || !r.Applied.Remembered || r.Applied.Since.IsZero() {
		t.Errorf("applied = %+v", r.Applied)
	}
	if w := r.Watermark; w == nil || !w.Exists || w.Key != "grants.default.G-1" || !w.KeyAtMark {
		t.Errorf("watermark = %+v", w)
	}
	want := []jetstream.Scanned{
		{Stream: "WEBHOOKS", Filter: "webhooks.grants.default", Exists: true, UpToSeq: 2, Read: 2},
		// The two accepted records of provider grants share a message.
		{Stream: "AUDIT", Filter: "audit.*.grants", Exists: true, UpToSeq: 4, Read: 3},
		{Stream: "GRANTS", Filter: "grants.grants.>", Exists: true, UpToSeq: 2, Read: 2},
		{Stream: "DLQ", Filter: "dlq.grants.default", Exists: true, UpToSeq: 1, Read: 1},
	}
	if !slices.Equal(r.Scans, want) {
		t.Errorf("scans = %+v\nwant    %+v", r.Scans, want)
	}

	// The scans cleaned up after themselves: only durables remain.
	for _, stream := range []string{"WEBHOOKS", "AUDIT", "GRANTS", "DLQ"} {
		s, err := c.JS.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, stream+" scan consumers deleted", func() bool {
			info, err := s.Info(ctx)
			return err == nil && info.State.Consumers == 0
		})
	}

	unknown, err := jetstream.Trace(ctx, c, jetstream.TraceQuery{Key: "grants:default:evt:nope"})
	if err != nil {
		t.Fatal(err)
	}
	if unknown.Found() || unknown.Applied.Remembered || unknown.Watermark != nil {
		t.Errorf("unknown key report = %+v", unknown)
	}
}

// A hashed account (acct#...) is in the WEBHOOKS subject as written in the
// key, while DLQ letters sit under the raw account: the provider's whole
// DLQ is read.
func TestInspectTraceHashedAccount(t *testing.T) {
	env := jstest.Start(t, "")
	c, ctx := env.Conn, t.Context()
	const acct = "acct#6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"
	key := "shop:" + acct + ":evt:1"
	seq := store(t, c, "shop", "weird:account", acct, key, "S-1")
	if _, err := jetstream.NewEffects(c).DeadLetter(ctx, storedEvent(t, c, seq), "no subject", 1); err != nil {
		t.Fatal(err)
	}
	r, err := jetstream.Trace(ctx, c, jetstream.TraceQuery{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stored) != 1 || r.Stored[0].Subject != "webhooks.shop.acct=23"+acct[5:] {
		t.Errorf("stored = %+v", r.Stored)
	}
	if len(r.Letters) != 1 || r.Letters[0].Subject != "dlq.shop.weird=3Aaccount" {
		t.Errorf("letters = %+v", r.Letters)
	}
	if r.Scans[3].Filter != "dlq.shop.>" || r.Scans[2].Filter != "grants.>" {
		t.Errorf("scans = %+v", r.Scans)
	}
	if r.Applied.Remembered {
		t.Errorf("applied = %+v; never remembered", r.Applied)
	}
	if r.Watermark == nil || r.Watermark.Key != "shop.weird=3Aaccount.S-1" || r.Watermark.Exists {
		t.Errorf("watermark = %+v", r.Watermark)
	}
}

func TestInspectSplitKey(t *testing.T) {
	tests := []struct {
		key, provider, account string
		ok                     bool
	}{
		{"grants:default:evt:msg_1", "grants", "default", true},
		{"portal:acme:dig:0abc", "portal", "acme", true},
		{"shop:acct#ff00:evt#1234", "shop", "acct#ff00", true},
		{"p::evt:1", "p", "", true},
		{"grants:default:evt:a:b:c", "grants", "default", true},
		{"grants:default", "", "", false},
		{"grants:default:", "", "", false},
		{"Grants:default:evt:1", "", "", false},
		{":default:evt:1", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			p, a, err := jetstream.SplitKey(tt.key)
			if tt.ok != (err == nil) || p != tt.provider || a != tt.account {
				t.Fatalf("SplitKey(%q) = %q, %q, %v", tt.key, p, a, err)
			}
			if err != nil && !errors.Is(err, jetstream.ErrBadKey) {
				t.Fatalf("error %v is not ErrBadKey", err)
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Events without a subject lease key-shard entries in WATERMARKS; status
// counts them apart from the subjects' watermarks.
func TestStatusCountsKeyShardsApart(t *testing.T) {
	env := jstest.Start(t, "")
	noop := consumer.EffectFunc(func(context.Context, consumer.Event) error { return nil })
	rules := map[string]consumer.Rule{
		"gh":     {Effects: []consumer.Effect{noop}},
		"grants": {Watermark: true, Effects: []consumer.Effect{noop}},
	}
	p := consumer.NewProcessor(rules, env.Marks, env.Applied, nil, discardAudit{}, slog.New(slog.DiscardHandler), nil,
		consumer.Options{Owner: "a", MaxDeliver: 3, LeaseTTL: time.Minute})
	events := []consumer.Event{
		{Key: "grants:default:evt:1", Provider: "grants", Account: "default", Subject: "G-1", OccurredAt: time.Now(), Seq: 1},
		{Key: "grants:default:evt:2", Provider: "grants", Account: "default", Subject: "G-2", OccurredAt: time.Now(), Seq: 2},
	}
	for i := range 50 {
		events = append(events, consumer.Event{Key: fmt.Sprintf("gh:default:dig:%d", i), Provider: "gh", Account: "default", Seq: uint64(i + 3)})
	}
	for _, ev := range events {
		if out := p.ProcessOnce(t.Context(), ev, 1); out.Decision != consumer.Applied {
			t.Fatalf("%s: %+v", ev.Key, out)
		}
	}
	st, err := jetstream.ReadStatus(t.Context(), env.Conn, jetstream.StatusOptions{Horizon: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b := st.Bucket(jetstream.BucketMarks)
	if b.KeyShards == 0 || b.KeyShards > 50 || b.Values-b.KeyShards != 2 {
		t.Fatalf("WATERMARKS %d entries, %d of them key shards; want the 2 subjects apart from 1-50 shards", b.Values, b.KeyShards)
	}
}

// An event without a subject runs its effects under a key shard's lease;
// trace reads that entry, so an operator can see the key held there (a
// holder that stopped before committing).
func TestInspectTraceShowsKeyShardLease(t *testing.T) {
	env := jstest.Start(t, "")
	c, ctx := env.Conn, t.Context()
	const key = "gh:default:dig:1"
	store(t, c, "gh", "default", "default", key, "")
	shard := consumer.LeaseKey(consumer.Event{Provider: "gh", Account: "default", Key: key})
	held := consumer.Mark{Lease: &consumer.Lease{Owner: "host/1/x", Key: key, Until: time.Now().Add(time.Minute)}}
	if _, err := env.Marks.Put(ctx, shard, held, 0); err != nil {
		t.Fatal(err)
	}
	r, err := jetstream.Trace(ctx, c, jetstream.TraceQuery{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	w := r.Watermark
	if w == nil || !w.Shard || w.Key != shard || !strings.HasPrefix(shard, "gh."+consumer.KeyShardToken+".") || !w.Exists || w.LeaseKey != key || w.LeaseOwner != "host/1/x" {
		t.Fatalf("watermark = %+v; want key shard %s leased to %s", w, shard, key)
	}
}
