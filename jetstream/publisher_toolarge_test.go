package jetstream

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The file store refuses a message record over 32 MiB whatever the max
// payload, with the error code of a full stream (10077) and "message too
// large": that is ErrTooLarge (the gateway's 413: no retry stores it), not
// ErrStreamFull (503 and Retry-After: the sender retried it for days;
// review BF). config check keeps max_body_bytes under it; this is for an
// external cluster or a header block past the room kept for it.
func TestStoreRefusesARecordOver32MiBAsTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes a 33 MiB message")
	}
	e, err := StartEmbedded(EmbeddedOptions{DataDir: t.TempDir(), MaxPayload: 40 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	c, err := Connect(ConnectOptions{Name: "test", Embedded: e})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := testStreams()
	sc.MaxMsgSize = 40 << 20
	if err := Provision(context.Background(), c.JS, sc); err != nil {
		t.Fatal(err)
	}
	m := msg("big")
	m.Body = make([]byte, 33<<20)
	_, err = NewPublisher(c, 10*time.Second).Publish(t.Context(), m)
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrStreamFull) {
		t.Fatalf("a 33 MiB message: %v; want ErrTooLarge, not ErrStreamFull", err)
	}
	m = msg("small")
	if _, err := NewPublisher(c, 10*time.Second).Publish(t.Context(), m); err != nil {
		t.Fatalf("a small message after it: %v", err)
	}
}
