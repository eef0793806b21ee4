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

// A mark an operator deleted (nats kv del) or purged reads as the zero
// Mark at the marker's revision, and a Put at that revision writes it again:
// the subject must not conflict forever. A create (rev 0) conflicts with
// the marker as with any entry, so guessing a subject is new costs one
// failed write, never a second read.
func TestWatermarkRecreatedAfterOperatorDelete(t *testing.T) {
	for _, purge := range []bool{false, true} {
		t.Run(map[bool]string{false: "delete", true: "purge"}[purge], func(t *testing.T) {
			env := jstest.Start(t, "")
			ctx := context.Background()
			at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			const key = "grants.default.G-1"
			first, err := env.Marks.Put(ctx, key, consumer.Mark{At: at}, 0)
			if err != nil {
				t.Fatal(err)
			}
			kv, err := env.Conn.JS.KeyValue(ctx, jetstream.BucketMarks)
			if err != nil {
				t.Fatal(err)
			}
			if purge {
				err = kv.Purge(ctx, key)
			} else {
				err = kv.Delete(ctx, key)
			}
			if err != nil {
				t.Fatal(err)
			}
			m, marker, err := env.Marks.Get(ctx, key)
			if err != nil || marker <= first || !m.At.IsZero() {
				t.Fatalf("after the operator's removal: %+v rev %d, err %v; want the zero mark at a revision after %d", m, marker, err, first)
			}
			if _, err := env.Marks.Put(ctx, key, consumer.Mark{At: at}, 0); !errors.Is(err, consumer.ErrConflict) {
				t.Fatalf("create over the marker: %v, want ErrConflict", err)
			}
			rev, err := env.Marks.Put(ctx, key, consumer.Mark{At: at.Add(time.Second)}, marker)
			if err != nil {
				t.Fatalf("put at the marker's revision: %v", err)
			}
			m, got, err := env.Marks.Get(ctx, key)
			if err != nil || got != rev || !m.At.Equal(at.Add(time.Second)) {
				t.Fatalf("got %+v rev %d err %v; want the new mark at rev %d", m, got, err, rev)
			}
		})
	}
}
