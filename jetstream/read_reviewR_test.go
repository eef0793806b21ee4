package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// reviewRPublish stores n events on subject, returning their sequences.
func reviewRPublish(t *testing.T, env *jstest.Env, subject string, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for range n {
		msg := &nats.Msg{Subject: subject, Header: nats.Header{nats.MsgIdHdr: {nats.NewInbox()}}, Data: []byte("{}")}
		ack, err := env.Conn.JS.PublishMsg(t.Context(), msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	return seqs
}

func reviewRConsumers(t *testing.T, env *jstest.Env, stream string) []string {
	t.Helper()
	s, err := env.Conn.JS.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range s.ConsumerNames(context.Background()).Name() {
		names = append(names, name)
	}
	return names
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// A ctx cancelled while fn runs: fn is not called again and Read returns
// ctx's error (the ordered consumer's iterator, before, was stopped by
// ctx). 50 messages: the rest of the batch is the rest of the range; 600:
// more batches follow.
func TestReviewRCancelMidBatchStopsCallbacks(t *testing.T) {
	for _, n := range []int{50, 600} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			env := jstest.Start(t, "")
			reviewRPublish(t, env, "webhooks.p.a", n)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			calls, after := 0, 0
			err := jetstream.Read(ctx, env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(m jetstream.StoredMsg, _ uint64) error {
				calls++
				if ctx.Err() != nil {
					after++
				}
				if calls == 5 {
					cancel()
				}
				return nil
			})
			if after > 0 || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled at the 5th of %d messages: fn called %d more times after, Read returned %v; want no more calls and context.Canceled", n, after, err)
			}
		})
	}
}

// A ctx cancelled before the call, or the connection closed mid-read: an
// error, no call.
func TestReviewRDeadCtxOrClosedConn(t *testing.T) {
	env := jstest.Start(t, "")
	reviewRPublish(t, env, "webhooks.p.a", 600)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	err := jetstream.Read(ctx, env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(jetstream.StoredMsg, uint64) error { calls++; return nil })
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Fatalf("dead ctx: %v after %d calls, want context.Canceled and none", err, calls)
	}
	err = jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(jetstream.StoredMsg, uint64) error {
		calls++
		if calls == 10 {
			env.Conn.Close()
		}
		return nil
	})
	if err == nil {
		t.Fatalf("connection closed after 10 of 600: Read returned nil after %d calls", calls)
	}
	t.Logf("closed: %v after %d calls", err, calls)
	// Started on the closed connection: its first request is not asked
	// again for the minute a stream's leader election gets.
	start := time.Now()
	err = jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(jetstream.StoredMsg, uint64) error { return nil })
	if !errors.Is(err, nats.ErrConnectionClosed) || time.Since(start) > 5*time.Second {
		t.Fatalf("on a closed connection: %v after %s, want nats.ErrConnectionClosed at once", err, time.Since(start))
	}
}

// Each range selects exactly what a brute-force pass over the stored
// messages selects.
func TestReviewRRangeEdges(t *testing.T) {
	env := jstest.Start(t, "")
	reviewRPublish(t, env, "webhooks.p.a", 5) // 1..5
	reviewRPublish(t, env, "webhooks.p.b", 5) // 6..10
	reviewRPublish(t, env, "webhooks.p.a", 5) // 11..15
	var all []jetstream.StoredMsg
	for seq := uint64(1); seq <= 15; seq++ {
		m, err := jetstream.GetMsg(t.Context(), env.Conn, jetstream.StreamWebhooks, seq)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m)
	}
	match := func(r jetstream.Range, m jetstream.StoredMsg) bool {
		if r.Filter == "webhooks.p.a" && m.Subject != r.Filter || r.Filter == "webhooks.p.b" && m.Subject != r.Filter || r.Filter == "webhooks.nope" {
			return false
		}
		if m.Seq < r.FromSeq || r.ToSeq > 0 && m.Seq > r.ToSeq {
			return false
		}
		if !r.Since.IsZero() && m.Time.Before(r.Since) || !r.Until.IsZero() && m.Time.After(r.Until) {
			return false
		}
		return true
	}
	ranges := []jetstream.Range{
		{},
		{FromSeq: 1}, {FromSeq: 7}, {FromSeq: 15}, {FromSeq: 16}, {FromSeq: 100},
		{ToSeq: 1}, {ToSeq: 7}, {ToSeq: 15}, {ToSeq: 100},
		{FromSeq: 4, ToSeq: 12}, {FromSeq: 12, ToSeq: 4}, {FromSeq: 7, ToSeq: 7},
		{Filter: "webhooks.p.a"}, {Filter: "webhooks.p.b"}, {Filter: "webhooks.nope"},
		{Filter: "webhooks.p.b", FromSeq: 11}, {Filter: "webhooks.p.b", ToSeq: 5}, {Filter: "webhooks.p.a", FromSeq: 3, ToSeq: 12},
		{Since: all[6].Time}, {Until: all[6].Time}, {Since: all[3].Time, Until: all[11].Time},
		{Since: all[11].Time, Until: all[3].Time},
		{FromSeq: 2, Since: all[6].Time}, {FromSeq: 9, Until: all[11].Time}, {FromSeq: 2, ToSeq: 13, Since: all[4].Time, Until: all[10].Time},
		{Filter: "webhooks.p.a", Since: all[4].Time, Until: all[12].Time},
		{Filter: "webhooks.p.b", FromSeq: 1, Since: all[7].Time},
	}
	for _, r := range ranges {
		var want []uint64
		for _, m := range all {
			if match(r, m) {
				want = append(want, m.Seq)
			}
		}
		var got []uint64
		var totals []uint64
		err := jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, r, func(m jetstream.StoredMsg, total uint64) error {
			got = append(got, m.Seq)
			totals = append(totals, total)
			return nil
		})
		if err != nil {
			t.Errorf("Read(%+v): %v", r, err)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("Read(%+v): %v, want %v", r, got, want)
		}
		for _, tot := range totals {
			if tot < uint64(len(got)) {
				t.Errorf("Read(%+v): total %d below the %d visited", r, tot, len(got))
				break
			}
		}
	}
	if left := reviewRConsumers(t, env, jetstream.StreamWebhooks); len(left) != 0 {
		t.Fatalf("consumers left: %v", left)
	}
}

// Messages stored while reading are not included, with a filter too, and
// when the tail of the range was deleted meanwhile (on DLQ, which allows
// deletes: dlq replay deletes letters).
func TestReviewRExcludesMessagesStoredDuringRead(t *testing.T) {
	cases := []struct {
		name  string
		r     jetstream.Range
		steps func(t *testing.T, env *jstest.Env)
		want  []uint64
	}{
		{"publish", jetstream.Range{}, func(t *testing.T, env *jstest.Env) { reviewRPublish(t, env, "dlq.p.a", 300) }, seqRange(1, 310)},
		{"filter publish", jetstream.Range{Filter: "dlq.p.a"}, func(t *testing.T, env *jstest.Env) { reviewRPublish(t, env, "dlq.p.a", 5) }, seqRange(1, 300)},
		{"filter publish other", jetstream.Range{Filter: "dlq.p.b"}, func(t *testing.T, env *jstest.Env) {
			reviewRPublish(t, env, "dlq.p.a", 5)
			reviewRPublish(t, env, "dlq.p.b", 5)
		}, seqRange(301, 310)},
		{"delete tail, publish", jetstream.Range{ToSeq: 300}, func(t *testing.T, env *jstest.Env) {
			for seq := uint64(290); seq <= 300; seq++ {
				if err := jetstream.DeleteMsg(t.Context(), env.Conn, jetstream.StreamDLQ, seq); err != nil {
					t.Fatal(err)
				}
			}
			reviewRPublish(t, env, "dlq.p.a", 3)
		}, seqRange(1, 289)},
		{"purge, publish", jetstream.Range{}, func(t *testing.T, env *jstest.Env) {
			s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Purge(t.Context(), js.WithPurgeSequence(280)); err != nil {
				t.Fatal(err)
			}
			reviewRPublish(t, env, "dlq.p.a", 3)
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := jstest.Start(t, "")
			reviewRPublish(t, env, "dlq.p.a", 300) // 1..300
			reviewRPublish(t, env, "dlq.p.b", 10)  // 301..310
			var got []uint64
			err := jetstream.Read(t.Context(), env.Conn, jetstream.StreamDLQ, tc.r, func(m jetstream.StoredMsg, _ uint64) error {
				got = append(got, m.Seq)
				if len(got) == 3 {
					tc.steps(t, env)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if tc.want == nil {
				// Purged up to 280 after the first batch was fetched: no
				// new one, none twice, in order.
				for i, s := range got {
					if s > 310 || i > 0 && s <= got[i-1] {
						t.Fatalf("read %v", got)
					}
				}
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("read %d (%v ... %v), want %d (%v ... %v)", len(got), got[:min(3, len(got))], got[max(0, len(got)-3):], len(tc.want), tc.want[:3], tc.want[len(tc.want)-3:])
			}
		})
	}
}

// Deliveries taken from the reader's consumer by someone else (a gap in
// its consumer sequence) are read again: each message once, in order.
func TestReviewRGapRecreates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		steal int
	}{{"middle", 700, 10}, {"tail", 300, 44}} {
		t.Run(tc.name, func(t *testing.T) {
			env := jstest.Start(t, "")
			reviewRPublish(t, env, "webhooks.p.a", tc.n)
			var got []uint64
			stolen := 0
			err := jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(m jetstream.StoredMsg, _ uint64) error {
				got = append(got, m.Seq)
				if len(got) == 100 {
					names := reviewRConsumers(t, env, jetstream.StreamWebhooks)
					if len(names) != 1 {
						t.Fatalf("consumers %v", names)
					}
					c, err := env.Conn.JS.Consumer(t.Context(), jetstream.StreamWebhooks, names[0])
					if err != nil {
						t.Fatal(err)
					}
					b, err := c.Fetch(tc.steal, js.FetchMaxWait(5*time.Second))
					if err != nil {
						t.Fatal(err)
					}
					for range b.Messages() {
						stolen++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if stolen != tc.steal {
				t.Fatalf("stole %d", stolen)
			}
			if !slices.Equal(got, seqRange(1, uint64(tc.n))) {
				t.Fatalf("read %d messages (%v ... %v), want 1..%d once each in order", len(got), got[:min(5, len(got))], got[max(0, len(got)-5):], tc.n)
			}
			if left := reviewRConsumers(t, env, jetstream.StreamWebhooks); len(left) != 0 {
				t.Fatalf("consumers left after the read: %v", left)
			}
		})
	}
}

// No consumer is left after a read, however it ends.
func TestReviewRLeavesNoConsumer(t *testing.T) {
	env := jstest.Start(t, "")
	reviewRPublish(t, env, "webhooks.p.a", 600)
	boom := errors.New("boom")
	cases := []struct {
		name string
		r    jetstream.Range
		fn   func(cancel context.CancelFunc, n int) error
		want error
	}{
		{"all", jetstream.Range{}, func(context.CancelFunc, int) error { return nil }, nil},
		{"stop", jetstream.Range{}, func(_ context.CancelFunc, n int) error {
			if n == 300 {
				return jetstream.ErrStop
			}
			return nil
		}, nil},
		{"error", jetstream.Range{}, func(_ context.CancelFunc, n int) error {
			if n == 3 {
				return boom
			}
			return nil
		}, boom},
		{"cancel", jetstream.Range{}, func(cancel context.CancelFunc, n int) error {
			if n == 100 {
				cancel()
				return context.Canceled
			}
			return nil
		}, context.Canceled},
		{"none since", jetstream.Range{Since: time.Now().Add(time.Hour)}, func(context.CancelFunc, int) error { return nil }, nil},
		{"none filter", jetstream.Range{Filter: "webhooks.nope"}, func(context.CancelFunc, int) error { return nil }, nil},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		err := jetstream.Read(ctx, env.Conn, jetstream.StreamWebhooks, tc.r, func(m jetstream.StoredMsg, _ uint64) error {
			n++
			return tc.fn(cancel, n)
		})
		cancel()
		if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: Read: %v, want %v", tc.name, err, tc.want)
		}
		if left := reviewRConsumers(t, env, jetstream.StreamWebhooks); len(left) != 0 {
			t.Errorf("%s: consumers left: %v", tc.name, left)
		}
	}
}

// A stream that does not exist, or is deleted mid-read, is an error (not a
// partial read reported as complete, nor a 60 s wait).
func TestReviewRStreamMissingOrDeleted(t *testing.T) {
	env := jstest.Start(t, "")
	err := jetstream.Read(t.Context(), env.Conn, "NOPE", jetstream.Range{}, func(jetstream.StoredMsg, uint64) error { return nil })
	if err == nil || !errors.Is(err, js.ErrStreamNotFound) {
		t.Errorf("missing stream: %v, want ErrStreamNotFound", err)
	}
	reviewRPublish(t, env, "webhooks.p.a", 600)
	n := 0
	start := time.Now()
	err = jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(m jetstream.StoredMsg, _ uint64) error {
		n++
		if n == 10 {
			if err := env.Conn.JS.DeleteStream(t.Context(), jetstream.StreamWebhooks); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	t.Logf("deleted mid-read: read %d, %v, after %s", n, err, time.Since(start))
	if err == nil {
		t.Fatalf("stream deleted after 10 of 600: read %d and Read returned nil", n)
	}
}

// The connection dropped mid-read (it reconnects): every message once, in
// order, and no consumer left behind.
func TestReviewRReconnectMidRead(t *testing.T) {
	env := jstest.Start(t, "")
	const n = 700
	reviewRPublish(t, env, "webhooks.p.a", n)
	var got []uint64
	drops := 0
	err := jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(m jetstream.StoredMsg, _ uint64) error {
		got = append(got, m.Seq)
		if len(got) == 100 || len(got) == 300 {
			cid, err := env.Conn.NC.GetClientID()
			if err != nil {
				t.Fatal(err)
			}
			if err := env.Embedded.Server().DisconnectClientByID(cid); err != nil {
				t.Fatal(err)
			}
			drops++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !slices.Equal(got, seqRange(1, n)) {
		t.Fatalf("read %d messages (%v ...), want 1..%d once each in order", len(got), got[:min(5, len(got))], n)
	}
	if left := reviewRConsumers(t, env, jetstream.StreamWebhooks); len(left) != 0 {
		t.Fatalf("consumers left after the read: %v", left)
	}
}

// A consumer lost mid-read (deleted here, as the server does past its
// inactive threshold when fn is slow) is re-created with the whole range
// still applied: filter, sequences and times.
func TestReviewRRecreateKeepsRange(t *testing.T) {
	env := jstest.Start(t, "")
	for range 300 {
		reviewRPublish(t, env, "webhooks.p.a", 1)
		reviewRPublish(t, env, "webhooks.p.b", 1)
	}
	times := map[uint64]time.Time{}
	for seq := uint64(1); seq <= 600; seq++ {
		m, err := jetstream.GetMsg(t.Context(), env.Conn, jetstream.StreamWebhooks, seq)
		if err != nil {
			t.Fatal(err)
		}
		times[seq] = m.Time
	}
	for _, r := range []jetstream.Range{
		{Filter: "webhooks.p.a", FromSeq: 50, ToSeq: 551, Since: times[101]},
		{Filter: "webhooks.p.b", Since: times[40], Until: times[500]},
		{FromSeq: 7, ToSeq: 580},
	} {
		var want []uint64
		for seq := uint64(1); seq <= 600; seq++ {
			sub := "webhooks.p.a"
			if seq%2 == 0 {
				sub = "webhooks.p.b"
			}
			if r.Filter != "" && sub != r.Filter || seq < r.FromSeq || r.ToSeq > 0 && seq > r.ToSeq ||
				!r.Since.IsZero() && times[seq].Before(r.Since) || !r.Until.IsZero() && times[seq].After(r.Until) {
				continue
			}
			want = append(want, seq)
		}
		var got []uint64
		err := jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, r, func(m jetstream.StoredMsg, _ uint64) error {
			got = append(got, m.Seq)
			if len(got) == 20 || len(got) == 150 {
				for _, name := range reviewRConsumers(t, env, jetstream.StreamWebhooks) {
					if err := env.Conn.JS.DeleteConsumer(t.Context(), jetstream.StreamWebhooks, name); err != nil {
						t.Fatal(err)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Read(%+v): %v", r, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Read(%+v): %d messages %v..., want %d %v...", r, len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
		}
	}
}

// The subscriptions a read makes (its pulls' inboxes, its probes) are gone
// soon after it returns, however it ends.
func TestReviewRLeavesNoSubscription(t *testing.T) {
	env := jstest.Start(t, "")
	reviewRPublish(t, env, "webhooks.p.a", 300)
	base := env.Conn.NC.NumSubscriptions()
	for _, stopAt := range []int{0, 1, 100, 256, 280} {
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		_ = jetstream.Read(ctx, env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(jetstream.StoredMsg, uint64) error {
			n++
			if n == stopAt {
				if stopAt%2 == 0 {
					cancel()
					return ctx.Err()
				}
				return jetstream.ErrStop
			}
			return nil
		})
		cancel()
		deadline := time.Now().Add(15 * time.Second)
		for env.Conn.NC.NumSubscriptions() > base {
			if time.Now().After(deadline) {
				t.Fatalf("stopped at %d: %d subscriptions 15 s after the read, %d before", stopAt, env.Conn.NC.NumSubscriptions(), base)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
