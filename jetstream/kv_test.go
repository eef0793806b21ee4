package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// Put writes marks itself, not through KeyValue.Create: a mark an operator
// deleted (nats kv del) must still be created again, not conflict forever.
func TestWatermarkRecreatedAfterOperatorDelete(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const key = "grants.default.G-1"
	if _, err := env.Marks.Put(ctx, key, consumer.Mark{At: at}, 0); err != nil {
		t.Fatal(err)
	}
	kv, err := env.Conn.JS.KeyValue(ctx, jetstream.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, rev, err := env.Marks.Get(ctx, key); err != nil || rev != 0 {
		t.Fatalf("after delete: rev %d, err %v; want 0, nil", rev, err)
	}
	rev, err := env.Marks.Put(ctx, key, consumer.Mark{At: at.Add(time.Second)}, 0)
	if err != nil {
		t.Fatalf("create over the delete marker: %v", err)
	}
	m, got, err := env.Marks.Get(ctx, key)
	if err != nil || got != rev || !m.At.Equal(at.Add(time.Second)) {
		t.Fatalf("got %+v rev %d err %v; want the new mark at rev %d", m, got, err, rev)
	}
	if _, err := env.Marks.Put(ctx, key, consumer.Mark{At: at}, 0); !errors.Is(err, consumer.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
}
