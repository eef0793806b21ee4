package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// reviewSPublish stores n events with keys prefix:i (i from `from`) on
// webhooks.p.a, asynchronously, and waits for every ack.
func reviewSPublish(t *testing.T, c *Conn, prefix string, from, n int) {
	t.Helper()
	var futs []js.PubAckFuture
	for i := from; i < from+n; i++ {
		if (i-from)%1000 == 999 {
			// Within nats.go's limit of outstanding async publishes (4000;
			// past it a publish fails after 200 ms: a loaded CI run did).
			select {
			case <-c.JS.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatal("async publishes not acknowledged in 30 s")
			}
		}
		key := fmt.Sprintf("%s:%d", prefix, i)
		m := &nats.Msg{Subject: "webhooks.p.a", Header: nats.Header{nats.MsgIdHdr: {key}, "Hookgate-Key": {key}}, Data: []byte(`{}`)}
		f, err := c.JS.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("no ack in 30 s")
		}
	}
}

// reviewSReadAll reads with rd until done or until want messages were
// read, checking stream sequences are 1..want exactly once, in order.
func reviewSReadAll(t *testing.T, rd *seqReader, want uint64, between func(batch int)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	next := uint64(1)
	for b := 0; next <= want; b++ {
		msgs, done, err := rd.batch(ctx, 100)
		if err != nil {
			t.Fatalf("batch %d at seq %d: %v", b, next, err)
		}
		if done {
			t.Fatalf("done at seq %d of %d: messages in range still exist", next, want)
		}
		for _, m := range msgs {
			if m.Meta.Sequence.Stream != next {
				t.Fatalf("batch %d: got seq %d, want %d", b, m.Meta.Sequence.Stream, next)
			}
			next++
		}
		if between != nil {
			between(b)
		}
	}
}

func reviewSConsumers(t *testing.T, c *Conn, stream string) []string {
	t.Helper()
	s, err := c.JS.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := s.ConsumerNames(t.Context())
	for n := range l.Name() {
		names = append(names, n)
	}
	return names
}

// The key index opened while the gateway (or another writer) keeps
// storing: every key stored before the open must be known after it.
func TestReviewSKeyIndexOpenWhilePublishing(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	const n = 20000
	reviewSPublish(t, c, "pre", 0, n)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var more atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i += 200 {
			select {
			case <-stop:
				return
			default:
			}
			reviewSPublish(t, c, "during", i, 200)
			more.Add(200)
		}
	}()
	k := openTestKeyIndex(t, c, dir)
	close(stop)
	wg.Wait()
	missing := 0
	for i := 0; i < n; i++ {
		if _, ok := k.idx.Lookup(fmt.Sprintf("pre:%d", i)); !ok {
			if missing < 5 {
				t.Errorf("pre:%d not read back", i)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d keys stored before the open not read back (frontier %d)", missing, n, k.idx.Frontier())
	}
	t.Logf("published %d more during the open; frontier %d", more.Load(), k.idx.Frontier())
	if names := reviewSConsumers(t, c, StreamWebhooks); len(names) > 0 {
		t.Errorf("consumers left behind: %v", names)
	}
}

// The caller is slower between two batches than the consumer's inactive
// threshold: the server drops the consumer, and the reader must go on from
// where it was, every message exactly once.
func TestReviewSSeqReaderConsumerInactiveBetweenBatches(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	const n = 1000
	reviewSPublish(t, c, "k", 0, n)
	rd := newSeqReader(c, StreamWebhooks, js.ConsumerConfig{
		HeadersOnly: true, InactiveThreshold: time.Second, DeliverPolicy: js.DeliverAllPolicy,
	}, 30*time.Second)
	reviewSReadAll(t, rd, n, func(b int) {
		if b != 2 && b != 5 {
			return
		}
		// Wait until the server dropped the consumer.
		name := rd.name
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := c.JS.Consumer(t.Context(), StreamWebhooks, name)
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumer %s not dropped after its inactive threshold", name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	rd.close()
	if names := reviewSConsumers(t, c, StreamWebhooks); len(names) > 0 {
		t.Errorf("consumers left behind: %v", names)
	}
}

// The reader's channel fills up (here with messages on its inbox that are
// none of its pulls'): deliveries dropped by nats.go are a gap, the reader
// must re-create its consumer and still read every message once, in order.
func TestReviewSSeqReaderChannelOverflow(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	const n = 3000
	reviewSPublish(t, c, "k", 0, n)
	rd := newSeqReader(c, StreamWebhooks, js.ConsumerConfig{
		HeadersOnly: true, InactiveThreshold: 10 * time.Second, DeliverPolicy: js.DeliverAllPolicy,
	}, 30*time.Second)
	reviewSReadAll(t, rd, n, func(b int) {
		if b%5 != 0 {
			return
		}
		for i := 0; i < cap(rd.msgs)+10; i++ {
			if err := c.NC.Publish(rd.inbox+".0", nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.NC.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	sub := rd.sub
	if d, _ := sub.Dropped(); d == 0 {
		t.Error("the flood dropped nothing: the test did not overflow the channel")
	}
	rd.close()
	if sub.IsValid() {
		t.Error("the reader's subscription is left after close")
	}
	if names := reviewSConsumers(t, c, StreamWebhooks); len(names) > 0 {
		t.Errorf("consumers left behind: %v", names)
	}
}

// Deliveries dropped for good (the channel full while a pull request of
// the reader's consumer delivers into it): the next pull sees a gap and
// the reader must re-create its consumer after the last one read.
func TestReviewSSeqReaderDroppedDeliveriesAreAGap(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	const n = 2000
	reviewSPublish(t, c, "k", 0, n)
	rd := newSeqReader(c, StreamWebhooks, js.ConsumerConfig{
		HeadersOnly: true, InactiveThreshold: 10 * time.Second, DeliverPolicy: js.DeliverAllPolicy,
	}, 30*time.Second)
	var first string
	reviewSReadAll(t, rd, n, func(b int) {
		if b != 3 {
			return
		}
		first = rd.name
		for i := 0; len(rd.msgs) < cap(rd.msgs); i++ {
			if err := c.NC.Publish(rd.inbox+".0", nil); err != nil {
				t.Fatal(err)
			}
			if i%1000 == 0 {
				_ = c.NC.Flush()
			}
		}
		_ = c.NC.Flush()
		// A request of the reader's consumer delivering 50 messages into
		// the full channel: nats.go drops them.
		before := rd.delivered
		req := []byte(`{"batch":50,"expires":1000000000}`)
		if err := c.NC.PublishRequest(pullSubject(StreamWebhooks, rd.name), rd.inbox+".9999", req); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			ci, err := c.JS.Consumer(t.Context(), StreamWebhooks, rd.name)
			if err == nil && ci.CachedInfo().Delivered.Consumer >= before+50 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the extra request was not served: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if d, _ := rd.sub.Dropped(); d == 0 {
			t.Fatal("nothing dropped")
		}
	})
	if rd.name == first {
		t.Error("the consumer was not re-created after the gap")
	}
	rd.close()
	if names := reviewSConsumers(t, c, StreamWebhooks); len(names) > 0 {
		t.Errorf("consumers left behind: %v", names)
	}
}

// A 409 limit status ("Exceeded MaxRequestBatch of N": a server's
// jetstream max_request_batch limit becomes every new consumer's
// MaxRequestBatch) answers each pull the same: the reader pulls the same
// batch again and again until its stall bound and fails, although
// messages are there to read. (Review S, on 321bfcb; the reader now pulls
// no more than the limit the refusal names.)
func TestReviewSSeqReaderMaxRequestBatchLimit(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	reviewSPublish(t, c, "k", 0, 300)
	rd := newSeqReader(c, StreamWebhooks, js.ConsumerConfig{
		HeadersOnly: true, InactiveThreshold: 10 * time.Second, DeliverPolicy: js.DeliverAllPolicy,
		MaxRequestBatch: 100, // as set by a server limit max_request_batch: 100
	}, 5*time.Second)
	defer rd.close()
	msgs, done, err := rd.batch(t.Context(), readBatch)
	if err != nil || done || len(msgs) == 0 {
		t.Fatalf("batch(%d) with the consumer's max batch 100: %d messages, done %v, err %v", readBatch, len(msgs), done, err)
	}
}

// seqReader's contract: "batch fails with ErrUnavailable after [stall]
// without a message (the caller's own time between batches not
// counted)". Only Read resets progress itself; catchUp (which writes a
// snapshot of every key between two batches every SnapshotEvery) and
// scanStream do not: a caller slower than the stall between two batches
// gets "no message ... although some are pending" at once, with messages
// there to read. (Review S, on 321bfcb; the stall is now counted within
// each batch call.)
func TestReviewSSeqReaderCallerTimeCountsAsStall(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	reviewSPublish(t, c, "k", 0, 300)
	const stall = 2 * time.Second
	rd := newSeqReader(c, StreamWebhooks, js.ConsumerConfig{
		HeadersOnly: true, InactiveThreshold: 10 * time.Second, DeliverPolicy: js.DeliverAllPolicy,
	}, stall)
	defer rd.close()
	if _, _, err := rd.batch(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stall + 500*time.Millisecond) // the caller's own work (a snapshot)
	msgs, done, err := rd.batch(t.Context(), 100)
	if err != nil || done || len(msgs) == 0 {
		t.Errorf("the batch after the caller took %s: %d messages, done %v, err %v", stall+500*time.Millisecond, len(msgs), done, err)
	}
}

// OpenKeyIndex stopped (ctx) during its read-back leaves no consumer and
// no subscription behind.
func TestReviewSKeyIndexOpenCancelledLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	reviewSPublish(t, c, "k", 0, 100000)
	subs := c.NC.NumSubscriptions()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			// Once it delivered (the reader knows its consumer: a cancel
			// during its creation is TestReviewSReadCancelledDuringCreate's).
			for _, name := range reviewSConsumers(t, c, StreamWebhooks) {
				if ci, err := c.JS.Consumer(t.Context(), StreamWebhooks, name); err == nil && ci.CachedInfo().Delivered.Consumer > 0 {
					cancel()
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := OpenKeyIndex(ctx, c, KeyIndexOptions{Path: dir + "/keys.idx", Horizon: time.Hour, Window: keyIndexWindow})
	if err == nil {
		t.Skip("the read-back ended before the cancel")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		names := reviewSConsumers(t, c, StreamWebhooks)
		n := c.NC.NumSubscriptions()
		if len(names) == 0 && n <= subs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a cancelled open (%v): consumers %v, subscriptions %d (before %d)", err, names, n, subs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The next open goes on from what the cancelled one saved and knows
	// every key.
	k := openTestKeyIndex(t, c, dir)
	missing := 0
	for i := 0; i < 100000; i++ {
		if _, ok := k.idx.Lookup(fmt.Sprintf("k:%d", i)); !ok {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d keys not known after an open cancelled during its read-back and a second open", missing)
	}
}

// Messages removed while a reader reads as catchUp does (inside the
// range and its whole tail; WEBHOOKS denies deletes, so a stream of its
// own): every message left is read, and the read ends (done).
func TestReviewSSeqReaderWhileRemoving(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), keyIndexStreams())
	defer e.Shutdown()
	defer c.Close()
	s, err := c.JS.CreateStream(t.Context(), js.StreamConfig{Name: "REVIEWS", Subjects: []string{"reviews.>"}, Storage: js.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30000
	var futs []js.PubAckFuture
	for i := 0; i < n; i++ {
		f, err := c.JS.PublishAsync("reviews.a", []byte("x"))
		if errors.Is(err, js.ErrTooManyStalledMsgs) {
			// Setup only: a loaded machine (CI) answers slower than the
			// publishes go out; wait for the answers and send it again.
			<-c.JS.PublishAsyncComplete()
			f, err = c.JS.PublishAsync("reviews.a", []byte("x"))
		}
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
	removed := func(seq uint64) bool { return seq%7 == 0 || seq > n-500 }
	rd := newSeqReader(c, "REVIEWS", js.ConsumerConfig{HeadersOnly: true, InactiveThreshold: 10 * time.Second,
		DeliverPolicy: js.DeliverByStartSequencePolicy, OptStartSeq: 1}, 30*time.Second)
	defer rd.close()
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-started
		for seq := uint64(n); seq >= 1; seq-- {
			if removed(seq) {
				if err := s.DeleteMsg(t.Context(), seq); err != nil {
					t.Errorf("delete %d: %v", seq, err)
					return
				}
			}
		}
	}()
	seen := map[uint64]bool{}
	var front uint64
	for front < n {
		msgs, done, err := rd.batch(t.Context(), int(min(4096, n-front)))
		if err != nil {
			t.Fatalf("at %d: %v", front, err)
		}
		if front == 0 {
			close(started)
		}
		if done {
			break
		}
		for _, m := range msgs {
			if m.Meta.Sequence.Stream <= front {
				t.Fatalf("seq %d after %d", m.Meta.Sequence.Stream, front)
			}
			front = m.Meta.Sequence.Stream
			seen[front] = true
		}
	}
	wg.Wait()
	missing := 0
	for seq := uint64(1); seq <= n; seq++ {
		if !removed(seq) && !seen[seq] {
			if missing < 5 {
				t.Errorf("seq %d not read", seq)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d messages left in the stream not read", missing)
	}
}

// A read cancelled while its consumer is being created: the server may
// create it after the client gave up on the answer; the reader does not
// know its name and close leaves it to the inactive threshold (a minute
// for Read). (Review S, on 321bfcb: 180 of 200 left; the reader now names
// its consumer and deletes it when the creation's answer did not come.)
func TestReviewSReadCancelledDuringCreateLeavesNoConsumer(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	reviewSPublish(t, c, "k", 0, 10)
	known := 0
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithCancel(t.Context())
		rd := newSeqReader(c, StreamWebhooks, js.ConsumerConfig{DeliverPolicy: js.DeliverAllPolicy, InactiveThreshold: readInactive}, readStall)
		go func() {
			// Cancel about when the create request is on its way.
			time.Sleep(time.Duration(i%20) * 50 * time.Microsecond)
			cancel()
		}()
		_, _, _ = rd.batch(ctx, 10)
		cancel()
		if rd.name != "" {
			known++
		}
		rd.close()
	}
	t.Logf("%d of 200 reads knew their consumer when closed", known)
	deadline := time.Now().Add(10 * time.Second)
	for {
		names := reviewSConsumers(t, c, StreamWebhooks)
		if len(names) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers left 10 s after 200 cancelled reads were closed: %v", len(names), names[:min(3, len(names))])
		}
		time.Sleep(100 * time.Millisecond)
	}
}
