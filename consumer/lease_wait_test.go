package consumer_test

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// leaseWaits records what Options.LeaseWait was told.
type leaseWaits struct {
	mu   sync.Mutex
	told []string // event key, lease owner
}

func (w *leaseWaits) wait(ev consumer.Event, l consumer.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.told = append(w.told, ev.Key+" "+l.Owner)
}

func (w *leaseWaits) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.told...)
}

// An operator command is told when an event starts waiting for another
// process's live lease, once per attempt, whether it applies the event
// (ProcessOnce: replay, dlq replay) or redelivers it (replay --redeliver):
// a replay run again after a kill -9 of the one before waited out the
// dead one's lease in silence.
func TestLeaseWaitIsToldOnce(t *testing.T) {
	env := jstest.Start(t, "")
	ctx := t.Context()
	event := func(key, occurred string) consumer.Event {
		return consumer.Event{Key: key, Provider: "grants", Account: "default", Subject: "G-1", Type: "t", OccurredRaw: occurred, ReceivedAt: time.Now()}
	}
	if out := newProcessor(env, "serve", true, &auditLog{}).ProcessOnce(ctx, event("k1", "2026-11-30T10:00:00Z"), 1); out.Decision != consumer.Applied {
		t.Fatalf("setup: %+v", out)
	}
	key := consumer.LeaseKey(event("k1", ""))
	waits := &leaseWaits{}
	fx := jetstream.NewEffects(env.Conn)
	rules := map[string]consumer.Rule{"grants": {Watermark: true, OneAccount: true, Effects: []consumer.Effect{consumer.GrantsEffect{Template: "grants.{provider}.{subject}.{type}", Grants: fx}}}}
	proc := consumer.NewProcessor(rules, env.Marks, env.Applied, fx, &auditLog{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, consumer.Options{
		Owner: "replay", MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, LeaseTTL: 5 * time.Second, InDoubtWait: time.Minute,
		LeaseWait: waits.wait,
	})

	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"apply", func() error {
			if out := proc.ProcessOnce(ctx, event("k2", "2026-11-30T11:00:00Z"), 1); out.Decision != consumer.Applied {
				t.Errorf("k2 after the holder's release: %+v, want applied", out)
			}
			return nil
		}, "k2 host-b/4242/x"},
		{"redeliver", func() error {
			return proc.Redeliver(ctx, event("k2", "2026-11-30T11:00:00Z"), &leaseSeer{env: env})
		}, "k2 host-b/4242/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waits.mu.Lock()
			waits.told = nil
			waits.mu.Unlock()
			setLease(t, env, key, &consumer.Lease{Owner: "host-b/4242/x", Key: "k-other", Until: time.Now().Add(time.Minute)})
			done := make(chan error, 1)
			go func() { done <- tc.run() }()
			waitFor(t, "LeaseWait to be told", func() bool { return len(waits.list()) > 0 })
			select {
			case err := <-done:
				t.Fatalf("returned (%v) while another holder's live lease held the subject", err)
			default:
			}
			setLease(t, env, key, nil) // the holder's commit
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("not done within 30 s of the holder's release")
			}
			if got := waits.list(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("LeaseWait told %q, want once %q", got, tc.want)
			}
		})
	}
}
