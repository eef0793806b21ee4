package jetstream

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Messages nats.go drops from the pull inbox (its channel full: more came
// than the source's pulls asked for) are logged by the source once per new
// drop, with its pulls and the channel's fill, so that a drop can be
// explained.
func TestSourceReportsDroppedDeliveries(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer func() { c.Close(); e.Shutdown() }()
	var logged syncLog
	// A source whose pull loop does not run: nothing reads its channel.
	s := &Source{nc: c.NC, prefetch: 2, inbox: c.NC.NewInbox(), open: map[string]*openPull{},
		health: pullHealth{log: slog.New(slog.NewJSONHandler(&logged, nil))}}
	s.msgs = make(chan *nats.Msg, 6*s.prefetch+64)
	sub, err := c.NC.ChanSubscribe(s.inbox+".*", s.msgs)
	if err != nil {
		t.Fatal(err)
	}
	s.sub = sub
	defer sub.Unsubscribe()
	s.reportDrops()
	if logged.String() != "" {
		t.Fatalf("logged with nothing dropped: %s", logged.String())
	}
	other, err := Connect(ConnectOptions{Name: "flood", Embedded: e})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for range 2 * cap(s.msgs) {
		if err := other.NC.Publish(s.inbox+".1", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if d, _ := sub.Dropped(); d >= cap(s.msgs) {
			break
		}
		if time.Now().After(end) {
			d, _ := sub.Dropped()
			t.Fatalf("nats.go dropped %d of %d sent to a channel of %d", d, 2*cap(s.msgs), cap(s.msgs))
		}
	}
	s.reportDrops()
	s.reportDrops() // nothing new: no second line
	for _, want := range []string{`"level":"WARN"`, `"dropped":76`, `"pulls_open":0`, `"queued":76`, `"capacity":76`, `"batch":2`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the line lacks %s: %s", want, logged.String())
		}
	}
	if n := strings.Count(logged.String(), "deliveries dropped from the pull inbox"); n != 1 {
		t.Errorf("%d lines for one drop: %s", n, logged.String())
	}
}

// The pull inbox holds every delivery the durable consumer may have
// outstanding, whichever pulls answer on it: here, with Next never called
// (the pull loop blocked handing over its first delivery), a pull for a
// whole window lands on the inbox too, as one given up on and taken late
// would, and the server sends up to MaxAckPending. Sized by the pulls
// alone (six batches of 32 and 64: 256), the channel overflowed and
// nats.go dropped deliveries, which came back only after the ack wait,
// behind newer events (a CI run, right after a consumer takeover).
func TestSourceInboxHoldsEveryOutstandingDelivery(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer func() { c.Close(); e.Shutdown() }()
	ctx := t.Context()
	const window, stored = 1000, 1100
	for i := range stored {
		if _, err := c.JS.Publish(ctx, "webhooks.p.a", []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	src, err := OpenSource(ctx, c, SourceOptions{MaxAckPending: window, Prefetch: 32, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	// src.inbox is the pull loop's, read here only for its name.
	req := fmt.Appendf(nil, `{"batch":%d,"expires":%d}`, window, (5 * time.Second).Nanoseconds())
	if err := c.NC.PublishRequest(pullSubject(StreamWebhooks, DurableApply), src.inbox+".900", req); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := src.cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := src.sub.Dropped()
		// One delivery is held by the blocked pull loop, not queued.
		if info.NumAckPending == window && len(src.msgs)+d >= window-1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("within 15 s: %d outstanding of a window of %d, %d queued, %d dropped", info.NumAckPending, window, len(src.msgs), d)
		}
	}
	if d, _ := src.sub.Dropped(); d != 0 {
		t.Fatalf("nats.go dropped %d of %d deliveries from a pull inbox of capacity %d", d, window, cap(src.msgs))
	}
}
