package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// lossyAPI returns c with its JetStream API behind a relay that leaves the
// first request on each of drop's API subjects ("STREAM.INFO.DLQ")
// unanswered, as a stream leader killed after the request reached it does
// (or one sent during the election that no server takes up), and passes
// every other one on to the server. dropped counts the requests left
// unanswered. Pulls go to the server directly (seqReader's own subject).
func lossyAPI(t *testing.T, c *Conn, drop ...string) (lossy *Conn, dropped *atomic.Int32) {
	t.Helper()
	return lossyConn(t, c, false, drop...)
}

// lostAnswers is lossyAPI where the dropped requests reach the server and
// only their answers are lost: a leader killed after it acted.
func lostAnswers(t *testing.T, c *Conn, drop ...string) (lossy *Conn, dropped *atomic.Int32) {
	t.Helper()
	return lossyConn(t, c, true, drop...)
}

func lossyConn(t *testing.T, c *Conn, acted bool, drop ...string) (lossy *Conn, dropped *atomic.Int32) {
	t.Helper()
	var mu sync.Mutex
	left := map[string]int{}
	for _, d := range drop {
		left[d]++
	}
	dropped = new(atomic.Int32)
	lossy = relayAPI(t, c, func(api string, m *nats.Msg) bool {
		mu.Lock()
		lose := left[api] > 0
		if lose {
			left[api]--
		}
		mu.Unlock()
		if !lose {
			return false
		}
		if acted {
			_, _ = c.NC.RequestMsg(&nats.Msg{Subject: "$JS.API." + api, Header: m.Header, Data: m.Data}, 5*time.Second)
		}
		dropped.Add(1)
		return true
	})
	return lossy, dropped
}

// relayAPI returns c with its JetStream API behind a relay: each request
// goes to intercept first (api is the subject after $JS.API.), and on to
// the server, its answer back, when intercept did not handle it.
func relayAPI(t *testing.T, c *Conn, intercept func(api string, m *nats.Msg) (handled bool)) *Conn {
	t.Helper()
	prefix := "relay." + nuid.Next() + ".api"
	sub, err := c.NC.Subscribe(prefix+".>", func(m *nats.Msg) {
		api := strings.TrimPrefix(m.Subject, prefix+".")
		if intercept(api, m) {
			return
		}
		resp, err := c.NC.RequestMsg(&nats.Msg{Subject: "$JS.API." + api, Header: m.Header, Data: m.Data}, 5*time.Second)
		if err != nil {
			return // the caller times out, as it would on the server's silence
		}
		_ = m.RespondMsg(&nats.Msg{Header: resp.Header, Data: resp.Data})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	j, err := js.NewWithAPIPrefix(c.NC, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &Conn{NC: c.NC, JS: j}
}

// returnsWithin runs fn and fails the test when it has not returned
// within d (fn's context ends with the test).
func returnsWithin(t *testing.T, d time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still waiting after %s", d)
		return nil
	}
}

// The first requests of replay, dlq list and dlq replay --all (a stream's
// or bucket's info before the read) ride out a stream leader's election:
// one left unanswered is asked again after its own few seconds. Before,
// the audit's `dlq list` started a second after a kill -9 of DLQ's leader
// waited for the CLI's whole 10 minutes, and `replay` failed after
// nats.go's 5 s ("stream WEBHOOKS: jetstream unavailable: context deadline
// exceeded"), though a new leader was elected 4-5 s after the kill.
func TestOperatorReadsFirstRequestRidesOutAnUnansweredOne(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	if _, _, err := ProvisionKV(t.Context(), c.JS, KVConfig{Replicas: 1, Horizon: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		msg := &nats.Msg{Subject: "dlq.p.a", Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("letter-%d", i)}}, Data: []byte("{}")}
		if _, err := c.JS.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
	readDLQ := func(ctx context.Context, c *Conn) error {
		n := 0
		if err := Read(ctx, c, StreamDLQ, Range{}, func(StoredMsg, uint64) error { n++; return nil }); err != nil {
			return err
		}
		if n != 3 {
			return fmt.Errorf("read %d letters, want 3", n)
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		drop []string
		op   func(ctx context.Context, c *Conn) error
	}{
		{"read without a deadline (replay)", []string{"STREAM.INFO." + StreamDLQ}, readDLQ},
		{"read with the CLI's 10 minutes (dlq list)", []string{"STREAM.INFO." + StreamDLQ}, func(ctx context.Context, c *Conn) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			return readDLQ(ctx, c)
		}},
		{"open the KV buckets (replay, dlq replay)", []string{"STREAM.INFO.KV_" + BucketMarks, "STREAM.INFO.KV_" + BucketApplied}, func(ctx context.Context, c *Conn) error {
			_, _, err := OpenKV(ctx, c.JS, KVConfig{Replicas: 1, Horizon: time.Hour})
			return err
		}},
		{"how long applied keys are kept (replay)", []string{"STREAM.INFO.KV_" + BucketApplied, "STREAM.INFO." + StreamGrants}, func(ctx context.Context, c *Conn) error {
			kept, err := KeptFor(ctx, c)
			if err == nil && kept != time.Hour {
				return fmt.Errorf("kept for %s, want 1h", kept)
			}
			return err
		}},
		{"one letter (dlq show SEQ, dlq replay SEQ)", []string{"STREAM.MSG.GET." + StreamDLQ}, func(ctx context.Context, c *Conn) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			m, err := ReadMsg(ctx, c, StreamDLQ, 2)
			if err == nil && m.Header.Get(nats.MsgIdHdr) != "letter-1" {
				return fmt.Errorf("read letter 2 as %q, want letter-1", m.Header.Get(nats.MsgIdHdr))
			}
			return err
		}},
		// In GRANTS, not to take a letter from the reads beside it: the
		// same request as for DLQ.
		{"remove a message (dlq remove SEQ), its first answer lost", []string{"STREAM.MSG.DELETE." + StreamGrants}, func(ctx context.Context, c *Conn) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			ack, err := c.JS.Publish(ctx, "grants.p.a", []byte("{}"))
			if err != nil {
				return err
			}
			if err := RemoveMsg(ctx, c, StreamGrants, ack.Sequence); err != nil {
				return err
			}
			if _, err := GetMsg(ctx, c, StreamGrants, ack.Sequence); !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("message %d after its removal: %v, want not found", ack.Sequence, err)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lossy, dropped := lossyAPI(t, c, tc.drop...)
			if err := returnsWithin(t, 30*time.Second, func() error { return tc.op(t.Context(), lossy) }); err != nil {
				t.Fatalf("with the first request left unanswered: %v", err)
			}
			if n := int(dropped.Load()); n != len(tc.drop) {
				t.Fatalf("%d requests left unanswered, want %d: the test did not reach the request it is about", n, len(tc.drop))
			}
		})
	}
}

// A stream that stays without a leader ends the ride-out after its budget
// with one line that says so (and ErrUnavailable), not with the last
// attempt's "context deadline exceeded" alone.
func TestRideOutLeaderGivesUpSayingTheLeaderWasMissing(t *testing.T) {
	c, sub := silentEnv(t)
	silent, err := js.NewWithAPIPrefix(c.NC, "silent.api")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute) // the CLI's
	defer cancel()
	err = returnsWithin(t, 30*time.Second, func() error {
		return rideOutLeader(ctx, "stream "+StreamDLQ, 2*time.Second, func(ctx context.Context) error {
			_, err := silent.Stream(ctx, StreamDLQ)
			return classify("stream "+StreamDLQ, err)
		})
	})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "stream DLQ had no leader for 2 s") || strings.Contains(msg, "\n") {
		t.Fatalf("err = %q, want one line starting %q", msg, "stream DLQ had no leader for 2 s")
	}
	if n, _, _ := sub.Pending(); n < 1 {
		t.Fatal("no request reached the silent API")
	}
}

// The reset of the durable consumer at serve's start asks again while the
// store does not answer yet (a whole-cluster restart: its one 5 s try
// failed with "consumer info: jetstream unavailable: context deadline
// exceeded", and the fetched deliveries came back after the ack wait).
func TestRedeliverOutstandingRidesOutAnUnansweredConsumerInfo(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	for i := range 2 {
		msg := &nats.Msg{Subject: "webhooks.p.a", Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("p:a:evt:%d", i)}}, Data: []byte("{}")}
		if _, err := c.JS.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.JS.CreateOrUpdateConsumer(t.Context(), StreamWebhooks, js.ConsumerConfig{
		Durable: DurableApply, AckPolicy: js.AckExplicitPolicy, AckWait: time.Hour, FilterSubject: "webhooks.>",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Fetched and never settled: a process that died.
	batch, err := cons.Fetch(2, js.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for range batch.Messages() {
		got++
	}
	if got != 2 {
		t.Fatalf("fetched %d, want 2 (%v)", got, batch.Error())
	}
	lossy, dropped := lossyAPI(t, c, "CONSUMER.INFO."+StreamWebhooks+"."+DurableApply)
	var n int
	var from uint64
	err = returnsWithin(t, 40*time.Second, func() (err error) {
		n, from, _, err = RedeliverOutstanding(t.Context(), lossy, 100, time.Time{})
		return err
	})
	if err != nil || n != 2 || from != 1 {
		t.Fatalf("RedeliverOutstanding = %d, %d, %v; want 2 outstanding, from 1", n, from, err)
	}
	if dropped.Load() != 1 {
		t.Fatalf("%d requests left unanswered, want 1", dropped.Load())
	}
}

// No responders is no election (JetStream off there): said at once, not
// after the ride-out's minute as "no leader".
func TestRideOutLeaderDoesNotWaitForNoResponders(t *testing.T) {
	calls := 0
	err := rideOutLeader(t.Context(), "stream DLQ", time.Minute, func(context.Context) error {
		calls++
		return classify("stream DLQ", nats.ErrNoResponders)
	})
	if !errors.Is(err, nats.ErrNoResponders) || calls != 1 {
		t.Fatalf("rideOutLeader = %v after %d tries, want no responders at the first", err, calls)
	}
}

// An operator's delete whose answer was lost after the server acted (a
// leader killed just after) is tried again and finds the message gone:
// that is the removal it asked for, not "not found". A refusal the
// server gave (WEBHOOKS denies deletes) comes back at once, not after a
// minute of tries.
func TestRemoveMsgAfterALostAnswer(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	ack, err := c.JS.Publish(t.Context(), "dlq.p.a", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	lossy, dropped := lostAnswers(t, c, "STREAM.MSG.DELETE."+StreamDLQ)
	if err := returnsWithin(t, 30*time.Second, func() error { return RemoveMsg(t.Context(), lossy, StreamDLQ, ack.Sequence) }); err != nil {
		t.Fatalf("remove with the first answer lost: %v, want it removed", err)
	}
	if dropped.Load() != 1 {
		t.Fatalf("%d answers lost, want 1: the test did not reach the request it is about", dropped.Load())
	}
	if _, err := GetMsg(t.Context(), c, StreamDLQ, ack.Sequence); !errors.Is(err, ErrNotFound) {
		t.Fatalf("letter %d after its removal: %v, want not found", ack.Sequence, err)
	}
	// A letter never there is still not found.
	if err := RemoveMsg(t.Context(), c, StreamDLQ, ack.Sequence+10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove of a letter never there: %v, want ErrNotFound", err)
	}
	// One removed already between two others (the server's "sequence N
	// not found", another code than for the stream's first or last): not
	// found, not "jetstream unavailable".
	var seqs []uint64
	for range 3 {
		a, err := c.JS.Publish(t.Context(), "dlq.p.a", []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, a.Sequence)
	}
	if err := DeleteMsg(t.Context(), c, StreamDLQ, seqs[1]); err != nil {
		t.Fatal(err)
	}
	for name, remove := range map[string]func() error{
		"DeleteMsg": func() error { return DeleteMsg(t.Context(), c, StreamDLQ, seqs[1]) },
		"RemoveMsg": func() error { return RemoveMsg(t.Context(), c, StreamDLQ, seqs[1]) },
	} {
		if err := remove(); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s of a letter removed already, between two others: %v, want ErrNotFound", name, err)
		}
	}
	wh, err := c.JS.Publish(t.Context(), "webhooks.p.a", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = RemoveMsg(t.Context(), c, StreamWebhooks, wh.Sequence)
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("remove from WEBHOOKS (deletes denied): %v after %s, want its refusal at once", err, time.Since(start).Round(time.Millisecond))
	}
}
