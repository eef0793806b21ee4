package jetstream_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	js "github.com/nats-io/nats.go/jetstream"
)

// The durable consumer deleted under a running consumer (an operator's
// `nats consumer rm`, a stream reset): the source's iterator closes, and
// Run returns its error, so serve stops instead of running on without
// applying anything.
func TestRunReturnsWhenDurableConsumerIsDeleted(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	proc := consumer.NewProcessor(map[string]consumer.Rule{}, env.Marks, env.Applied, jetstream.NewEffects(env.Conn), discardAudit{},
		slog.New(slog.DiscardHandler), nil, consumer.Options{Owner: "me", LeaseTTL: 40 * time.Second})
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 128, AckWait: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- proc.Run(runCtx, src, 8) }()
	if err := env.Conn.JS.DeleteConsumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, js.ErrMsgIteratorClosed) {
			t.Fatalf("Run returned %v, want the closed iterator's error", err)
		}
	case <-time.After(15 * time.Second):
		stop()
		t.Fatalf("Run still running 15 s after its durable consumer was deleted; returned %v only when ctx was cancelled", <-done)
	}
}
