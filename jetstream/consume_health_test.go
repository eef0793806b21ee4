package jetstream_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// Pulls the server keeps refusing (here its consumer's MaxRequestBatch set
// below the source's prefetch behind hookgate's back) take no event; the
// log says so at warn once they have failed for WarnAfter, not only at
// debug, and says when they work again.
func TestSourceWarnsWhenPullsKeepFailing(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	waitLog := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logged(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log within 10 s: %s", want, logged())
			}
		}
	}
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 1000, Prefetch: 8, AckWait: time.Minute, Log: logger, WarnAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	setMaxRequestBatch := func(n int) {
		t.Helper()
		c, err := env.Conn.JS.Consumer(ctx, jetstream.StreamWebhooks, jetstream.DurableApply)
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.CachedInfo().Config
		cfg.MaxRequestBatch = n
		if _, err := env.Conn.JS.UpdateConsumer(ctx, jetstream.StreamWebhooks, cfg); err != nil {
			t.Fatal(err)
		}
	}
	setMaxRequestBatch(1)
	waitLog("consumer pulls keep failing")
	for _, want := range []string{`"level":"WARN"`, "MaxRequestBatch"} {
		if !strings.Contains(logged(), want) {
			t.Errorf("the warning lacks %s: %s", want, logged())
		}
	}
	if strings.Contains(logged(), "consumer pulls work again") {
		t.Fatalf("pulls said to work again while refused: %s", logged())
	}
	setMaxRequestBatch(0)
	if _, err := env.Conn.JS.Publish(ctx, "webhooks.p.a", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := src.Next(nctx); err != nil {
		t.Fatalf("Next after the refusal went away: %v", err)
	}
	waitLog("consumer pulls work again")
}
