package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
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
// dead letters, no retries beyond a nak, the watermarks' revisions cached
// in memory, the subject and time found by a byte search of the body
// (the bench's bodies, see Body), one instance only. It imports nats.go
// directly, like the floor's gateway, so none of hookgate's costs are in
// it. With Lease it claims the subject's entry before the publish as
// well, the contract's own example of cross-instance ordering: three
// writes per event, as hookgate makes.

// Names of the floor consumer's streams, bucket and durable consumer.
const (
	FloorGrantsStream = "FLOOR_GRANTS"
	FloorMarksBucket  = "FLOOR_MARKS"
	FloorDurable      = "floor-apply"
)

// FloorConsumerOptions configure the floor's consumer.
type FloorConsumerOptions struct {
	// Workers is how many events are applied at once (one lane each, a
	// subject always on the same lane); 0 runs no consumer.
	Workers int
	// Lease also claims the watermark entry before the publish.
	Lease bool
}

// floorConsumer applies the FLOOR stream's events.
type floorConsumer struct {
	o      FloorConsumerOptions
	j      js.JetStream
	kv     js.KeyValue
	lanes  []chan js.Msg
	failed atomic.Uint64 // writes that failed (the event was nak'ed)
}

// startFloorConsumer provisions the floor consumer's stream, bucket and
// durable consumer and starts applying; stop ends it and waits for the
// lanes.
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
	c := &floorConsumer{o: o, j: j, kv: kv, lanes: make([]chan js.Msg, o.Workers)}
	var wg sync.WaitGroup
	for i := range c.lanes {
		c.lanes[i] = make(chan js.Msg, 64)
		wg.Go(func() { c.lane(ctx, c.lanes[i]) })
	}
	cc, err := cons.Consume(func(m js.Msg) {
		subject, _, ok := floorFields(m.Data())
		if !ok {
			_ = m.Term()
			return
		}
		h := fnv.New32a()
		_, _ = h.Write(subject)
		c.lanes[h.Sum32()%uint32(len(c.lanes))] <- m
	})
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", FloorDurable, err)
	}
	return func() uint64 {
		cc.Stop()
		<-cc.Closed()
		for _, l := range c.lanes {
			close(l)
		}
		wg.Wait()
		return c.failed.Load()
	}, nil
}

// floorMark is a lane's memory of one subject's watermark entry.
type floorMark struct {
	rev uint64
	at  time.Time
}

// lane applies the events of its subjects, one at a time.
func (c *floorConsumer) lane(ctx context.Context, in <-chan js.Msg) {
	marks := map[string]floorMark{}
	for m := range in {
		subject, at, _ := floorFields(m.Data())
		key := floorKey(subject)
		mk := marks[key]
		if mk.rev != 0 && !at.After(mk.at) {
			_ = m.Ack() // stale
			continue
		}
		if err := c.apply(ctx, m, key, at, &mk); err != nil {
			c.failed.Add(1)
			_ = m.Nak()
			delete(marks, key) // read it again next time
			continue
		}
		marks[key] = mk
		_ = m.Ack()
	}
}

// apply makes the event's writes: [lease,] publish, watermark.
func (c *floorConsumer) apply(ctx context.Context, m js.Msg, key string, at time.Time, mk *floorMark) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if c.o.Lease {
		if err := c.write(ctx, key, []byte("lease"), mk); err != nil {
			return err
		}
	}
	id := m.Headers().Get(nats.MsgIdHdr)
	if _, err := c.j.PublishMsg(ctx, &nats.Msg{Subject: "fgrants." + key, Data: m.Data()}, js.WithMsgID(id)); err != nil {
		return err
	}
	if err := c.write(ctx, key, at.AppendFormat(nil, time.RFC3339Nano), mk); err != nil {
		return err
	}
	mk.at = at
	return nil
}

// write sets key to val by compare-and-set on mk's revision (a create
// when there is none), reading the entry's revision again once on a
// conflict (an entry from an earlier run the lane did not know).
func (c *floorConsumer) write(ctx context.Context, key string, val []byte, mk *floorMark) error {
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
			return nil
		}
		if !errors.Is(err, js.ErrKeyExists) && !errors.Is(err, js.ErrKeyRevisionMismatch) {
			return err
		}
		e, gerr := c.kv.Get(ctx, key)
		if gerr != nil {
			return gerr
		}
		mk.rev = e.Revision()
	}
	return errors.New("watermark entry kept changing")
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
