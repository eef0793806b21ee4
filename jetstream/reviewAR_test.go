package jetstream_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// revocableAuth accepts every client until revoked, then refuses them all
// (a user revoked for good), counting the refusals.
type revocableAuth struct {
	revoked  atomic.Bool
	refusals atomic.Int64
}

func (a *revocableAuth) Check(server.ClientAuthentication) bool {
	if a.revoked.Load() {
		a.refusals.Add(1)
		return false
	}
	return true
}

func reviewARAuthServer(t *testing.T) (*server.Server, *revocableAuth) {
	t.Helper()
	auth := &revocableAuth{}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, CustomClientAuthentication: auth})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s, auth
}

// Review AR (nats.IgnoreAuthErrorAbort): a NATS server that refuses the
// credentials for good (a revoked user) is now retried every 250-750 ms
// forever, and each refusal is logged by asyncErrorLogger as a WARN "nats
// asynchronous error ... authorization violation": thousands of lines an
// hour per connection (serve holds two). And Connected(), which /readyz
// answers with, still says only "not connected to NATS (reconnecting)",
// not that the credentials are refused.
func TestReviewARAuthRevokedLogFloodAndReadyzReason(t *testing.T) {
	s, auth := reviewARAuthServer(t)
	logger, logged := captureLog()
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "revoked", URL: s.ClientURL(), Token: "t", Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	auth.revoked.Store(true)
	if err := c.NC.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	const attempts = 8
	for deadline := time.Now().Add(30 * time.Second); auth.refusals.Load() < attempts; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d refusals within 30 s", auth.refusals.Load())
		}
	}
	// The reconnect attempts keep going (that is the point of the change);
	// the log must not carry a line for each of them.
	n := strings.Count(strings.ToLower(logged()), "authorization violation")
	if n > 3 {
		t.Errorf("%d refused reconnects logged %d lines naming the authorization violation: a warning per attempt, forever (want a few, then rate-limited)", auth.refusals.Load(), n)
	}
	err = c.Connected()
	if err == nil {
		t.Fatal("connected with revoked credentials")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authoriz") {
		t.Errorf("Connected() (what /readyz says) = %q: does not say the server refuses the credentials", err)
	}
}

// Holds: at start, credentials refused still fail Connect at once with
// ErrAuthorization (IgnoreAuthErrorAbort does not apply to the first
// dial: RetryOnFailedConnect is false).
func TestReviewARAuthRefusedAtStartFailsFast(t *testing.T) {
	s, auth := reviewARAuthServer(t)
	auth.revoked.Store(true)
	start := time.Now()
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "refused", URL: s.ClientURL(), Token: "t"})
	if err == nil {
		c.Close()
		t.Fatal("connected with refused credentials")
	}
	if !errors.Is(err, jetstream.ErrAuthorization) {
		t.Errorf("error %v is not ErrAuthorization", err)
	}
	t.Logf("refused after %v: %v (refusals %d)", time.Since(start), err, auth.refusals.Load())
}

// TestReviewARHoldsOldestUnappliedAfterAging: k1 is held
// unacknowledged (a retry waiting its backoff) while k2 is applied; both
// age out of WEBHOOKS (k1 lost). k3 comes and is applied. Nothing stored
// is unapplied now, but the ack floor is still 0 (the server moves it at
// its next pending check, up to ack_wait later): oldestUnapplied finds
// seq 1 gone, jumps to the stream's first sequence and reports k3, an
// applied event, as the oldest unapplied (status: "lost at ..." for an
// applied event; the metric its age).
func TestReviewARHoldsOldestUnappliedAfterAging(t *testing.T) {
	cfg := jstest.Streams()
	cfg.Horizon = time.Second
	cfg.Webhooks.MaxAge = 3 * time.Second
	env := jstest.StartWith(t, "", cfg)
	ctx := t.Context()
	pub := jetstream.NewPublisher(env.Conn, 5*time.Second)
	publish := func(key string) {
		t.Helper()
		h := nats.Header{}
		h.Set("Hookgate-Key", key)
		if _, err := pub.Publish(ctx, jetstream.Message{Subject: "webhooks.p.default", Key: key, Header: h, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	publish("k1")
	publish("k2")
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 16, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Stop)
	next := func() *consumer.Message {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		m, err := src.Next(nctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	_ = next()                                       // k1: held, not acknowledged
	if err := next().Delivery.Ack(ctx); err != nil { // k2 applied
		t.Fatal(err)
	}
	first := func() uint64 {
		t.Helper()
		s, err := env.Conn.JS.Stream(ctx, jetstream.StreamWebhooks)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.FirstSeq
	}
	for deadline := time.Now().Add(30 * time.Second); first() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("k1 and k2 never aged out")
		}
	}
	publish("k3")
	m3 := next()
	if err := m3.Delivery.Ack(ctx); err != nil { // k3 applied
		t.Fatal(err)
	}
	// Wait until the server has the ack (nothing pending but k1's entry).
	s, _ := env.Conn.JS.Stream(ctx, jetstream.StreamWebhooks)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cons, err := s.Consumer(ctx, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		if ci := cons.CachedInfo(); ci.NumPending == 0 && ci.NumAckPending <= 1 {
			t.Logf("floor %d, ack pending %d, first %d", ci.AckFloor.Stream, ci.NumAckPending, first())
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("k3's ack not seen")
		}
	}
	if first() != 3 {
		t.Skip("k3 aged out too: machine too slow for this check")
	}
	got, err := jetstream.OldestUnapplied(ctx, env.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsZero() {
		t.Errorf("OldestUnapplied = %v: k3 (seq 3) is applied and nothing stored waits; reported as unapplied", got)
	}
}

// TestReviewARHoldsHasStoreRealStore: HasStore's path matches where a real
// embedded server keeps WEBHOOKS, also under a data_dir with glob
// characters.
func TestReviewARHoldsHasStoreRealStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hg[eu-1]")
	if jetstream.HasStore(dir) {
		t.Fatal("HasStore true before any store")
	}
	jstest.Start(t, dir)
	if !jetstream.HasStore(dir) {
		t.Errorf("HasStore(%q) = false with a running embedded store", dir)
	}
}

// TestReviewARHoldsStatusWithoutConsumer: ReadStatus with events stored
// and no durable consumer reads fine (the consumer reported missing, no
// oldest-unapplied read).
func TestReviewARHoldsStatusWithoutConsumer(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	h := nats.Header{}
	h.Set("Hookgate-Key", "k1")
	if _, err := jetstream.NewPublisher(env.Conn, 5*time.Second).Publish(ctx, jetstream.Message{Subject: "webhooks.p.default", Key: "k1", Header: h, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	st, err := jetstream.ReadStatus(ctx, env.Conn, jetstream.StatusOptions{Horizon: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Consumers[0]; c.Exists || !c.OldestUnapplied.IsZero() {
		t.Errorf("consumer %+v, want missing with no oldest-unapplied", c)
	}
}
