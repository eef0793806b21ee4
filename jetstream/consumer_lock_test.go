package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

func testLock(t *testing.T, c *Conn, owner string) *ConsumerLock {
	t.Helper()
	l, err := ProvisionConsumerLock(t.Context(), c.JS, 1, owner, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l.ttl = 1500 * time.Millisecond
	return l
}

// waitTrue polls cond until it holds or 10 s pass.
func waitTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
	}
}

// One holder at a time runs; a stop hands the lock on at once; a holder
// that stops renewing (dead) loses it after its ttl; a holder whose entry
// someone else took stops running.
func TestConsumerLockOneAtATime(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	a, b := testLock(t, c, "a"), testLock(t, c, "b")
	h := &twoHolders{}
	running, overlap, run := &h.running, &h.overlap, h.run
	actx, stopA := context.WithCancel(t.Context())
	aDone := make(chan error, 1)
	go func() { aDone <- a.Hold(actx, run(0)) }()
	waitTrue(t, "a runs", func() bool { return running[0].Load() == 1 })
	bctx, stopB := context.WithCancel(t.Context())
	bDone := make(chan error, 1)
	go func() { bDone <- b.Hold(bctx, run(1)) }()
	// b stands by through several of a's renewals.
	time.Sleep(3 * a.ttl)
	if running[1].Load() != 0 {
		t.Fatal("b runs while a holds the lock")
	}
	stopA()
	<-aDone
	handedAt := time.Now()
	waitTrue(t, "b runs after a stopped", func() bool { return running[1].Load() == 1 })
	// Released, b takes it at its next look (consumerLockPoll); not
	// released, no sooner than the ttl left after a's last renewal (at
	// least nine tenths of it) plus the grace.
	if took, unreleased := time.Since(handedAt), a.ttl*9/10+a.grace; took >= unreleased {
		t.Errorf("b took over %s after a's stop, as late as a lock never released (%s)", took, unreleased)
	}

	// Someone else writes the entry over b's: b stops running. (b renews
	// meanwhile: a write between our read and ours conflicts, read again.)
	var deadUntil time.Time
	for tries := 0; ; tries++ {
		m, rev, err := b.store.Get(t.Context(), consumerLockKey)
		if err != nil || m.Lease == nil || m.Lease.Owner != "b" {
			t.Fatalf("lock %+v, %v; want b's", m, err)
		}
		deadUntil = time.Now().Add(b.ttl)
		dead := consumer.Mark{Lease: &consumer.Lease{Owner: "dead", Key: consumerLockKey, Until: deadUntil}}
		_, err = b.store.Put(t.Context(), consumerLockKey, dead, rev)
		if err == nil {
			break
		}
		if !errors.Is(err, consumer.ErrConflict) || tries == 10 {
			t.Fatal(err)
		}
	}
	waitTrue(t, "b stops running once its lock was taken", func() bool { return running[1].Load() == 0 })
	// "dead" never renews: b takes the lock once it expired and the grace
	// (time for a holder that lost it to finish its events) has passed.
	waitTrue(t, "b runs again after the dead holder's ttl and grace", func() bool { return running[1].Load() == 1 })
	if early := time.Until(deadUntil.Add(b.grace)); early > 0 {
		t.Fatalf("b took an unreleased lock %s before its expiry plus grace", early)
	}
	lockOwner := func() string {
		t.Helper()
		st, err := ReadStatus(t.Context(), c, StatusOptions{Horizon: time.Hour})
		if err != nil || st.ConsumerLock == nil {
			t.Fatalf("status: %+v, %v", st.ConsumerLock, err)
		}
		return st.ConsumerLock.Owner
	}
	if o := lockOwner(); o != "b" {
		t.Fatalf("status shows the lock held by %q, want b", o)
	}
	stopB()
	<-bDone
	if o := lockOwner(); o != "" {
		t.Fatalf("status shows the lock held by %q after b released it", o)
	}
	if overlap.Load() {
		t.Fatal("two holders ran at once")
	}
	// Handed over: a's (no holder before), b's after a's stop; not b's
	// second, taken from the holder that stopped renewing.
	if got := h.runs(); got != "0 true, 1 true, 1 false" {
		t.Fatalf("runs (holder, handed over): %s; want 0 true, 1 true, 1 false", got)
	}
}

// A holder that loses NATS stops its run a quarter of the ttl before its
// entry expires, and the run may take a while to finish its events and
// hand back the rest (up to the ack wait, which the grace is): a standby
// must not start before that. (Without the grace it took the expired
// lock while the old run was still draining; found by review.)
func TestLostLockLeavesTheOldRunTimeToDrain(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	ca, err := Connect(ConnectOptions{Name: "a", Embedded: e})
	if err != nil {
		t.Fatal(err)
	}
	a, b := testLock(t, ca, "a"), testLock(t, c, "b")
	// The old run's events take less than ttl/4 + grace to finish. b's
	// grace is longer than the drain by a second, so only a stall that
	// long could make them overlap; without a grace at all b would take
	// the lock at its expiry, half a second before the drain ends.
	b.grace = 2 * a.grace
	h := &twoHolders{drainFirst: a.grace}
	running, overlap, run := &h.running, &h.overlap, h.run
	actx, stopA := context.WithCancel(t.Context())
	defer stopA()
	go func() { _ = a.Hold(actx, run(0)) }()
	waitTrue(t, "a runs", func() bool { return running[0].Load() == 1 })
	bctx, stopB := context.WithCancel(t.Context())
	defer stopB()
	go func() { _ = b.Hold(bctx, run(1)) }()
	ca.Close() // a loses NATS: its renewals fail from now on
	waitTrue(t, "b runs", func() bool { return running[1].Load() == 1 })
	if overlap.Load() {
		t.Fatal("b started while a's run, cancelled as lost, was still draining")
	}
}

// twoHolders counts the runs of two lock holders (0 and 1) and notes
// whether they ever overlapped; holder 0's run takes drainFirst to return
// after its ctx ends (finishing its events).
type twoHolders struct {
	running    [2]atomic.Int32
	overlap    atomic.Bool
	drainFirst time.Duration
	mu         sync.Mutex
	handedOver []string // "<holder> <handedOver>" per run, in order
}

func (h *twoHolders) runs() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.handedOver, ", ")
}

func (h *twoHolders) run(i int) func(context.Context, bool) error {
	return func(ctx context.Context, handedOver bool) error {
		h.mu.Lock()
		h.handedOver = append(h.handedOver, fmt.Sprintf("%d %t", i, handedOver))
		h.mu.Unlock()
		h.running[i].Add(1)
		if h.running[1-i].Load() > 0 {
			h.overlap.Store(true)
		}
		<-ctx.Done()
		if i == 0 {
			time.Sleep(h.drainFirst)
		}
		h.running[i].Add(-1)
		return nil
	}
}
