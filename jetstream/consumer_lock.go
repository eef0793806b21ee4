package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hookgate/hookgate/consumer"
	js "github.com/nats-io/nats.go/jetstream"
)

// BucketLocks holds the consumer lock (see ConsumerLock).
const BucketLocks = "HOOKGATE_LOCKS"

// consumerLockKey is the lock's entry in BucketLocks.
const consumerLockKey = "consumer"

// ConsumerLock elects the one instance that applies events. Several
// instances pulling from the shared durable consumer side by side would
// each get some of a subject's events, and the one holding the newer event
// could apply it first, turning the older one stale; so only the holder of
// this lock pulls at all, the others stand by. The lock is an entry in
// BucketLocks naming its owner and an expiry, changed only by
// compare-and-set and renewed by its own goroutine (never held up by busy
// workers). A holder that stops releases it; a dead one's expires after
// ttl. Safe for one Hold at a time.
type ConsumerLock struct {
	store *Watermarks
	owner string
	ttl   time.Duration
	// grace is how long past its expiry a standby leaves a lock that was
	// not released: the holder may still be finishing the events it had
	// (up to the ack wait), and a dead holder's fetched events come back
	// after the ack wait, ahead of anything newer, for the one taking over.
	grace time.Duration
	log   *slog.Logger
	now   func() time.Time
	// Dead (nil: none), set before Hold, reports whether the lock's
	// owner is known to be gone though its lock has not expired: the
	// embedded server's serve takes over at once from another embedded
	// serve's lock (data_dir's lock keeps two off one store), as from a
	// released one, and waits for a live one's (a consumer-only serve
	// with nats.url at its listen).
	Dead func(owner string) bool
}

// ProvisionConsumerLock creates or updates BucketLocks and returns the lock
// for owner (unique per process); ackWait is the durable consumer's.
func ProvisionConsumerLock(ctx context.Context, j js.JetStream, replicas int, owner string, ackWait time.Duration, log *slog.Logger) (*ConsumerLock, error) {
	_, err := provisionBucket(ctx, j, replicas, js.KeyValueConfig{
		Bucket:      BucketLocks,
		Description: "hookgate: which instance applies events",
	})
	if err != nil {
		return nil, err
	}
	return &ConsumerLock{store: newWatermarks(j.Conn(), BucketLocks), owner: owner, ttl: consumerLockTTL, grace: ackWait, log: log, now: time.Now}, nil
}

// consumerLockTTL is how long a holder that stopped renewing (it died, or
// lost NATS) keeps the lock, not counting the grace; it renews every tenth
// of it and gives the lock up a quarter of it before it ends. So a holder
// rides out at least 13 s without an answer from the bucket: a leader
// election of HOOKGATE_LOCKS after its node died takes 4-9 s (at 10 s,
// renewed every third and given up a third early, a holder could ride out
// 3.3 s, and such an election stopped the applying; review K).
const consumerLockTTL = 20 * time.Second

// Hold runs run whenever this instance holds the lock, until ctx ends: it
// waits for the lock, runs, and releases it when run returns. If the lock
// is lost (not renewed in time), run's ctx is cancelled and Hold waits for
// the lock again. An error from run (its source failed: the cluster in
// trouble) is logged, the lock released, and Hold waits for it again: the
// process, and its gateway, stay up.
//
// run's handedOver says the lock was free (its last holder stopped and
// released it, or there was none), a Dead owner's, or this instance's own: no other holder
// is still running, so the durable consumer's deliveries outstanding now
// are ones nobody will settle (see RedeliverOutstanding). False: taken
// from a holder that stopped renewing, which may still be finishing.
func (l *ConsumerLock) Hold(ctx context.Context, run func(ctx context.Context, handedOver bool) error) error {
	for {
		rev, handedOver, err := l.acquire(ctx)
		if err != nil {
			return nil // ctx ended
		}
		l.log.Info("consumer lock taken: this instance applies events")
		runCtx, cancel := context.WithCancel(ctx)
		renewed := make(chan uint64, 1)
		go func() { renewed <- l.renew(runCtx, rev, cancel) }()
		err = run(runCtx, handedOver)
		cancel()
		last := <-renewed
		if last != 0 {
			l.release(last)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case last == 0:
			l.log.Warn("consumer lock lost: stopped applying events, waiting for the lock")
		case err != nil:
			l.log.Error("consumer stopped; released the lock, waiting for it again", slog.String("error", err.Error()))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(consumerLockPoll):
			}
		}
	}
}

// acquire waits until this instance holds the lock and returns its
// revision, and whether it was handed over (see Hold); an error only when
// ctx ends. A lock not released is taken only grace after its expiry.
func (l *ConsumerLock) acquire(ctx context.Context) (uint64, bool, error) {
	logged := false // a failed read was logged; until one succeeds
	for {
		m, rev, err := l.store.Get(ctx, consumerLockKey)
		switch {
		case err != nil && !logged:
			l.log.Warn("read consumer lock; retrying", slog.String("error", err.Error()))
			logged = true
		case err == nil:
			logged = false
			now := l.now()
			dead := m.Lease != nil && l.Dead != nil && l.Dead(m.Lease.Owner)
			if m.Lease == nil || m.Lease.Owner == l.owner || dead || !now.Before(m.Lease.Until.Add(l.grace)) {
				n, err := l.store.Put(ctx, consumerLockKey, l.mark(now), rev)
				if err == nil {
					return n, m.Lease == nil || m.Lease.Owner == l.owner || dead, nil
				}
				if errors.Is(err, consumer.ErrConflict) {
					continue // someone else moved it: read again
				}
			}
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(consumerLockPoll):
		}
	}
}

// consumerLockPoll is how often a standby looks at the lock.
const consumerLockPoll = time.Second

func (l *ConsumerLock) mark(now time.Time) consumer.Mark {
	return consumer.Mark{Lease: &consumer.Lease{Owner: l.owner, Key: consumerLockKey, Until: now.Add(l.ttl)}}
}

// renew extends the lock every tenth of its ttl until ctx ends, and returns
// the revision then held; 0 and lost() when someone else holds it, or when
// it could not be renewed until only a quarter of the ttl was left (a
// renewal without an answer is tried again sooner). A standby takes an
// unreleased lock only grace after its expiry: time for the run, cancelled
// by lost, to finish or hand back its events.
func (l *ConsumerLock) renew(ctx context.Context, rev uint64, lost context.CancelFunc) uint64 {
	until := l.now().Add(l.ttl)
	wait := l.ttl / 10
	for {
		select {
		case <-ctx.Done():
			return rev
		case <-time.After(wait):
		}
		now := l.now()
		// A ctx of its own: the run's may end meanwhile.
		rctx, cancel := context.WithTimeout(context.Background(), l.ttl/10)
		n, err := l.store.Put(rctx, consumerLockKey, l.mark(now), rev)
		cancel()
		switch {
		case err == nil:
			rev, until, wait = n, now.Add(l.ttl), l.ttl/10
		case errors.Is(err, consumer.ErrConflict), !l.now().Before(until.Add(-l.ttl / 4)):
			lost()
			return 0
		default:
			wait = l.ttl / 20
		}
	}
}

// release clears the lock if this instance still holds it at rev, so a
// standby takes over at once.
func (l *ConsumerLock) release(rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := l.store.Put(ctx, consumerLockKey, consumer.Mark{}, rev); err != nil {
		l.log.Warn("release consumer lock; a standby takes over when it expires", slog.String("error", err.Error()))
	}
}
