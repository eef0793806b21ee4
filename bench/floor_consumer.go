package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// The floor's consumer is the least a consumer on JetStream can do for
// issue 6's end-to-end goal ("the consumer applies: watermark plus
// publish effect"): for each stored event, in order per subject, a
// compare-and-set of the subject's watermark in a KV bucket and a publish
// of the event to a GRANTS-like stream with its Nats-Msg-Id, then the
// ack. Nothing else: no lease, no memory of applied keys, no audit, no
// dead letters, the watermarks' revisions cached in memory, the subject
// and time found by a byte search of the body (the bench's bodies, see
// Body), one instance only. A write that fails is tried again in place,
// so order holds and nothing is dropped. It imports nats.go directly,
// like the floor's gateway, so none of hookgate's costs are in it. With
// Lease it claims the subject's entry before the publish and commits
// after, the contract's own example of cross-instance ordering: three
// writes per event, as hookgate makes.

// Names of the floor consumer's streams, bucket and durable consumer.
const (
	FloorGrantsStream = "FLOOR_GRANTS"
	FloorMarksBucket  = "FLOOR_MARKS"
	FloorDurable      = "floor-apply"
)

// FloorConsumerOptions configure the floor's consumer.
type FloorConsumerOptions struct {
	// Workers is how many events are applied at once, each of another
	// subject; 0 runs no consumer.
	Workers int
	// Lease also claims the watermark entry before the publish.
	Lease bool
}

// floorConsumer applies the FLOOR stream's events: any free worker takes
// the oldest waiting event of a subject no other worker holds (as
// hookgate's Run does), so a subject's events run one at a time, in
// stream order, and Workers events are in flight whenever Workers
// subjects have events waiting.
type floorConsumer struct {
	o  FloorConsumerOptions
	j  js.JetStream
	kv js.KeyValue

	mu      sync.Mutex
	more    *sync.Cond
	queues  map[string][]js.Msg // per subject key, oldest first; present while held or waiting
	ready   []string            // subjects with events waiting and no worker
	marks   map[string]floorMark
	closing bool

	failed atomic.Uint64 // writes that failed (each tried again in place)
}

// floorMark is the consumer's memory of one subject's watermark entry.
type floorMark struct {
	rev uint64
	at  time.Time
}

// startFloorConsumer provisions the floor consumer's stream, bucket and
// durable consumer and starts applying; stop ends it (events still
// waiting are left unacknowledged, for a later run) and returns how many
// writes failed.
func startFloorConsumer(ctx context.Context, j js.JetStream, maxMsg int32, o FloorConsumerOptions) (stop func() uint64, err error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := j.CreateStream(cctx, js.StreamConfig{
		Name: FloorGrantsStream, Subjects: []string{"fgrants.>"}, Retention: js.LimitsPolicy, Storage: js.FileStorage,
		MaxAge: 720 * time.Hour, MaxBytes: 10e9, MaxMsgSize: maxMsg, Duplicates: 2 * time.Minute, Replicas: 1,
	}); err != nil {
		return nil, fmt.Errorf("create %s: %w", FloorGrantsStream, err)
	}
	kv, err := j.CreateKeyValue(cctx, js.KeyValueConfig{Bucket: FloorMarksBucket, History: 1, Storage: js.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", FloorMarksBucket, err)
	}
	cons, err := j.CreateOrUpdateConsumer(cctx, FloorStream(maxMsg).Name, js.ConsumerConfig{
		Durable: FloorDurable, AckPolicy: js.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 1000,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", FloorDurable, err)
	}
	c := &floorConsumer{o: o, j: j, kv: kv, queues: map[string][]js.Msg{}, marks: map[string]floorMark{}}
	c.more = sync.NewCond(&c.mu)
	runCtx, cancelRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() { c.work(runCtx) })
	}
	cc, err := cons.Consume(c.take)
	if err != nil {
		cancelRun()
		c.close()
		wg.Wait()
		return nil, fmt.Errorf("consume %s: %w", FloorDurable, err)
	}
	return func() uint64 {
		cc.Stop()
		<-cc.Closed()
		cancelRun()
		c.close()
		wg.Wait()
		return c.failed.Load()
	}, nil
}

// take queues a delivered event behind its subject's; it never blocks, so
// the pull keeps its pace (MaxAckPending bounds what waits).
func (c *floorConsumer) take(m js.Msg) {
	subject, _, ok := floorFields(m.Data())
	if !ok {
		_ = m.Term()
		return
	}
	key := floorKey(subject)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	q, held := c.queues[key]
	c.queues[key] = append(q, m)
	if !held {
		c.ready = append(c.ready, key)
		c.more.Signal()
	}
}

func (c *floorConsumer) close() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.more.Broadcast()
}

// work applies the head event of one ready subject at a time.
func (c *floorConsumer) work(ctx context.Context) {
	for {
		c.mu.Lock()
		for len(c.ready) == 0 && !c.closing {
			c.more.Wait()
		}
		if c.closing {
			c.mu.Unlock()
			return
		}
		key := c.ready[0]
		c.ready = c.ready[1:]
		m, mk := c.queues[key][0], c.marks[key]
		c.mu.Unlock()

		mk, ok := c.apply(ctx, m, key, mk)

		c.mu.Lock()
		if ok {
			c.marks[key] = mk
		}
		if q := c.queues[key][1:]; len(q) > 0 && ok {
			c.queues[key] = q
			c.ready = append(c.ready, key)
			c.more.Signal()
		} else if ok {
			delete(c.queues, key)
		}
		// !ok: stopping; the subject stays held, its events unacked.
		c.mu.Unlock()
	}
}

// errFloorStale: the stored watermark is not older than the event.
var errFloorStale = errors.New("stale")

// apply applies m unless it is stale; ok is false only when ctx ended
// first. Each write that fails is tried again in place, with a growing
// pause and the delivery kept alive, so a subject's events stay in order
// and none is dropped.
//
// Without Lease: the watermark by compare-and-set, then the publish (the
// compare-and-set first, so an event older than a stored watermark it did
// not know is found stale before it is published). With Lease: the lease,
// the publish, the watermark, the order that keeps effects after a claim;
// a lease entry keeps the watermark's time after a "lease|" prefix, so
// whoever reads it still sees the subject's watermark.
func (c *floorConsumer) apply(ctx context.Context, m js.Msg, key string, mk floorMark) (_ floorMark, ok bool) {
	_, at, _ := floorFields(m.Data())
	mark := func(t time.Time) []byte { return t.AppendFormat(nil, time.RFC3339Nano) }
	stale := false
	// claim writes val on mk, taking in a stored mark it did not know.
	claim := func(val []byte) func(context.Context) error {
		return func(ctx context.Context) error {
			next, err := c.write(ctx, key, val, at, mk)
			mk = next
			if errors.Is(err, errFloorStale) {
				stale = true
				return nil
			}
			return err
		}
	}
	publish := func(ctx context.Context) error {
		_, err := c.j.PublishMsg(ctx, &nats.Msg{Subject: "fgrants." + key, Data: m.Data()}, js.WithMsgID(m.Headers().Get(nats.MsgIdHdr)))
		return err
	}
	var steps []func(context.Context) error
	if c.o.Lease {
		steps = []func(context.Context) error{claim(append([]byte("lease|"), mark(mk.at)...)), publish, claim(mark(at))}
	} else {
		steps = []func(context.Context) error{claim(mark(at)), publish}
	}
	if mk.rev != 0 && !at.After(mk.at) {
		stale = true
	}
	for _, step := range steps {
		if stale {
			break
		}
		if !c.retry(ctx, m, step) {
			return mk, false
		}
	}
	_ = m.Ack()
	if !stale {
		mk.at = at
	}
	return mk, true
}

// retry runs step until it succeeds or ctx ends.
func (c *floorConsumer) retry(ctx context.Context, m js.Msg, step func(context.Context) error) bool {
	pause := 10 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := step(sctx)
		cancel()
		if err == nil {
			return true
		}
		c.failed.Add(1)
		_ = m.InProgress()
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// write sets key to val by compare-and-set on mk's revision (a create
// when there is none). On a conflict (an entry the consumer did not know:
// an earlier run's, or its own write whose answer was lost) it reads the
// entry: val itself is success; a time not older than at (the event
// being applied) returns that mark with errFloorStale; else it tries once
// more on the entry's revision.
func (c *floorConsumer) write(ctx context.Context, key string, val []byte, at time.Time, mk floorMark) (floorMark, error) {
	for range 2 {
		var rev uint64
		var err error
		if mk.rev == 0 {
			rev, err = c.kv.Create(ctx, key, val)
		} else {
			rev, err = c.kv.Update(ctx, key, val, mk.rev)
		}
		if err == nil {
			mk.rev = rev
			return mk, nil
		}
		if !errors.Is(err, js.ErrKeyExists) && !errors.Is(err, js.ErrKeyRevisionMismatch) {
			return mk, err
		}
		e, gerr := c.kv.Get(ctx, key)
		if gerr != nil {
			return mk, gerr
		}
		if bytes.Equal(e.Value(), val) {
			// This write landed before an answer was lost.
			return floorMark{rev: e.Revision(), at: mk.at}, nil
		}
		stored, perr := time.Parse(time.RFC3339Nano, strings.TrimPrefix(string(e.Value()), "lease|"))
		if perr != nil {
			stored = time.Time{}
		}
		mk = floorMark{rev: e.Revision(), at: stored}
		if !at.After(stored) && !stored.IsZero() {
			return mk, errFloorStale
		}
	}
	return mk, errors.New("watermark entry kept changing")
}

// floorFields finds grant_id and occurred_at in a bench body (see Body)
// by a byte search.
func floorFields(body []byte) (subject []byte, at time.Time, ok bool) {
	str := func(name string) []byte {
		i := bytes.Index(body, []byte(`"`+name+`":"`))
		if i < 0 {
			return nil
		}
		v := body[i+len(name)+4:]
		j := bytes.IndexByte(v, '"')
		if j < 0 {
			return nil
		}
		return v[:j]
	}
	subject, ts := str("grant_id"), str("occurred_at")
	if len(subject) == 0 || ts == nil {
		return nil, time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(ts))
	return subject, at, err == nil
}

// floorKey is a subject as a KV key and subject token: as it is when it
// holds only letters, digits, '-' and '_' (the bench's grant ids), else
// in hex.
func floorKey(subject []byte) string {
	for _, b := range subject {
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_') {
			return "x" + hex.EncodeToString(subject)
		}
	}
	return string(subject)
}
