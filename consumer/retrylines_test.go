package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// A receiver refusing every event logged one "event will be retried" line
// per attempt per event (a metrics and logs audit, stop 38): now at most
// consumer.RetryLinesPerSecond a second per provider, each line saying how many it
// stands for, and no retry lost from the count. Real embedded JetStream.
func TestRetryLinesAreBounded(t *testing.T) {
	env := jstest.Start(t, "")
	const events = 60
	var tries atomic.Int64
	failing := consumer.EffectFunc(func(context.Context, consumer.Event) error {
		tries.Add(1)
		return errors.New("receiver down")
	})
	var logged syncBuf
	fx := jetstream.NewEffects(env.Conn)
	proc := consumer.NewProcessor(map[string]consumer.Rule{"grants": {OneAccount: true, Effects: []consumer.Effect{failing}}}, env.Marks, env.Applied, fx, &auditLog{},
		slog.New(slog.NewJSONHandler(&logged, nil)), nil, consumer.Options{Owner: "t", MaxDeliver: 3, Backoff: []time.Duration{20 * time.Millisecond}, LeaseTTL: time.Second})
	p := jetstream.NewPublisher(env.Conn, 5*time.Second)
	for i := range events {
		key := fmt.Sprintf("grants:default:evt:r%d", i)
		h := map[string][]string{"Hookgate-Key": {key}, "Hookgate-Provider": {"grants"}, "Hookgate-Account": {"default"}}
		if _, err := p.Publish(t.Context(), jetstream.Message{Subject: "webhooks.grants.default", Key: key, Header: h, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 256, AckWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); _ = proc.Run(ctx, src, 8); src.Stop() }()
	for end := time.Now().Add(60 * time.Second); tries.Load() < 3*events || letters(t, env) < events; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d of %d attempts, %d of %d letters within 60 s", tries.Load(), 3*events, letters(t, env), events)
		}
	}
	took := time.Since(began)
	cancel()
	<-done
	lines, stands := 0, 0
	letterLines, letterStands := 0, 0
	dec := json.NewDecoder(bytes.NewReader([]byte(logged.String())))
	for {
		var rec struct {
			Level      string
			Msg        string
			Suppressed int
		}
		if dec.Decode(&rec) != nil {
			break
		}
		if rec.Msg == "event will be retried" {
			lines++
			stands += 1 + rec.Suppressed
		}
		if strings.HasPrefix(rec.Msg, "event dead-lettered") && rec.Level == "WARN" {
			letterLines++
			letterStands += 1 + rec.Suppressed
		}
	}
	// The dead letters' warnings are bounded the same way (one a letter
	// before stop 40: a soak's receiver outage wrote 15k of them).
	// Per second, the lines let through and one telling the held-back
	// tail at its end (LineLimit.AllowOrLater, since stop 42).
	perSecond := consumer.RetryLinesPerSecond + 1
	if most := perSecond * (int(took/time.Second) + 2); letterLines > most || letterLines == 0 {
		t.Errorf("%d dead-letter warnings for %d letters in %s, want 1 to %d (%d a second)", letterLines, events, took.Round(time.Millisecond), most, perSecond)
	}
	if letterStands > events {
		t.Errorf("the dead-letter warnings stand for %d letters, more than the %d there were", letterStands, events)
	}
	retries := 2 * events // the third attempt dead-letters
	if most := perSecond * (int(took/time.Second) + 2); lines > most || lines == 0 {
		t.Errorf("%d retry lines for %d retries in %s, want 1 to %d (%d a second)", lines, retries, took.Round(time.Millisecond), most, perSecond)
	}
	if stands > retries {
		t.Errorf("the retry lines stand for %d retries, more than the %d there were", stands, retries)
	}
}

// letters counts DLQ's messages.
func letters(t *testing.T, env *jstest.Env) int {
	t.Helper()
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	return int(s.CachedInfo().State.Msgs)
}
