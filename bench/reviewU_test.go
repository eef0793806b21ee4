package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

func reviewUPublish(t *testing.T, j js.JetStream, id, grant string, at time.Time, size int) {
	t.Helper()
	if _, err := j.PublishMsg(t.Context(), &nats.Msg{Subject: "floor.in", Data: Body(id, grant, at, size)}, js.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
}

// reviewUWait polls the floor's durable until done says its info (and
// whatever else done reads) is as wanted, failing with what after 20 s.
func reviewUWait(t *testing.T, j js.JetStream, what string, done func(*js.ConsumerInfo) bool) {
	t.Helper()
	cons, err := j.Consumer(t.Context(), FloorStream(0).Name, FloorDurable)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := cons.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if done(info) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %s; pending %d, unacked %d", what, info.NumPending, info.NumAckPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reviewUSettled waits until the floor's durable has nothing pending or
// unacknowledged.
func reviewUSettled(t *testing.T, j js.JetStream) {
	t.Helper()
	reviewUWait(t, j, "nothing pending or unacked", func(i *js.ConsumerInfo) bool { return i.NumPending == 0 && i.NumAckPending == 0 })
}

func reviewUGrantIDs(t *testing.T, j js.JetStream, key string) []string {
	t.Helper()
	c, err := j.OrderedConsumer(t.Context(), FloorGrantsStream, js.OrderedConsumerConfig{FilterSubjects: []string{"fgrants." + key}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for {
		b, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			ids = append(ids, m.Headers().Get(nats.MsgIdHdr))
			n++
		}
		if n == 0 {
			return ids
		}
	}
}

// A watermark entry newer than the event (left by an earlier run, or
// written by another instance) must make the event stale. The lane only
// compares with its in-memory copy; on the create's conflict it reads the
// entry's revision and ignores its value, so it publishes the stale event
// and moves the watermark backwards.
func TestReviewUStaleAgainstStoredWatermark(t *testing.T) {
	j := floorJS(t)
	ctx := t.Context()
	kv, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: FloorMarksBucket, History: 1, Storage: js.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	newer := t0.Add(100 * time.Second).Format(time.RFC3339Nano)
	if _, err := kv.Put(ctx, "G-0", []byte(newer)); err != nil {
		t.Fatal(err)
	}
	reviewUPublish(t, j, "evt-old", "G-0", t0.Add(time.Second), 256)
	stop, err := startFloorConsumer(ctx, j, 1<<20, FloorConsumerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	reviewUSettled(t, j)
	stop()
	e, err := kv.Get(ctx, "G-0")
	if err != nil {
		t.Fatal(err)
	}
	if ids := reviewUGrantIDs(t, j, "G-0"); len(ids) != 0 || string(e.Value()) != newer {
		t.Fatalf("event at t0+1s against a stored watermark at t0+100s: published %v, watermark now %q; want nothing published, watermark %q", ids, e.Value(), newer)
	}
}

// A write that fails must not let the subject's next event overtake it,
// nor be dropped: e2's publish keeps failing (FLOOR_GRANTS's max message
// size, startFloorConsumer's maxMsg, is below its size), so e3 waits
// behind it and both stay unacknowledged. (Review U found the first
// version nak'ing e2 and applying e3 first, then acking e2 as stale.)
func TestReviewUNakLetsSuccessorOvertake(t *testing.T) {
	j := floorJS(t)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	reviewUPublish(t, j, "e1", "G-1", t0.Add(1*time.Second), 256)
	reviewUPublish(t, j, "e2", "G-1", t0.Add(2*time.Second), 2000) // too large for FLOOR_GRANTS below
	reviewUPublish(t, j, "e3", "G-1", t0.Add(3*time.Second), 256)
	stop, err := startFloorConsumer(t.Context(), j, 1000, FloorConsumerOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	reviewUWait(t, j, "e1 applied, e2 and e3 delivered and unacked", func(i *js.ConsumerInfo) bool {
		return i.NumPending == 0 && i.NumAckPending == 2 && len(reviewUGrantIDs(t, j, "G-1")) == 1
	})
	failed := stop()
	if ids := reviewUGrantIDs(t, j, "G-1"); len(ids) != 1 || ids[0] != "e1" || failed == 0 {
		t.Fatalf("G-1's GRANTS: %v after %d failed writes; want [e1] and e2's failures counted", ids, failed)
	}
	cons, err := j.Consumer(t.Context(), FloorStream(0).Name, FloorDurable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 2 || info.AckFloor.Stream != 1 {
		t.Fatalf("after stop: %d unacked, ack floor %d; want e2 and e3 left unacked for a later run", info.NumAckPending, info.AckFloor.Stream)
	}
}

// A write that keeps failing must be tried again after a pause, not in a
// busy loop that takes CPU from the gateway and the other workers (the
// first version nak'ed it with no delay: 772 attempts in 0.5 s).
func TestReviewUNakHotLoop(t *testing.T) {
	j := floorJS(t)
	reviewUPublish(t, j, "big", "G-2", time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), 2000)
	stop, err := startFloorConsumer(t.Context(), j, 1000, FloorConsumerOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if failed := stop(); failed > 10 {
		t.Fatalf("one failing event was attempted %d times in 0.5 s", failed)
	}
}

// A free worker takes any other subject's event, as hookgate's Run does:
// a's first event keeps failing (too large for FLOOR_GRANTS, maxMsg
// below), so a is held with 99 more events queued behind it, and b's one
// event, delivered after all of them, is still applied. (The first
// version fed lanes by subject hash from one dispatcher that blocked on a
// full lane, 64 events: b's event waited behind a's lane; the reviewer's
// own version of this test measured how far behind, which depended on
// the delivery's pace.)
func TestReviewULaneHeadOfLineBlocking(t *testing.T) {
	j := floorJS(t)
	a, b := "G-a", "G-b"
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	reviewUPublish(t, j, "a-0", a, t0, 2000)
	for i := 1; i < 100; i++ {
		reviewUPublish(t, j, fmt.Sprintf("a-%d", i), a, t0.Add(time.Duration(i)*time.Millisecond), 256)
	}
	reviewUPublish(t, j, "b-0", b, t0.Add(time.Second), 256)
	stop, err := startFloorConsumer(t.Context(), j, 1000, FloorConsumerOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	deadline := time.Now().Add(20 * time.Second)
	for len(reviewUGrantIDs(t, j, b)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s's only event not applied while %s's first one keeps failing", b, a)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ids := reviewUGrantIDs(t, j, a); len(ids) != 0 {
		t.Fatalf("%s's later events applied before its first: %v", a, ids)
	}
}
