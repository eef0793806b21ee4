package jetstream

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// keptMetadata records a raised horizon, keeps the latest such record,
// drops it once the TTL alone bounds what APPLIED remembers again, and
// leaves other metadata (the server's own) alone.
func TestKeptMetadata(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	for _, tc := range []struct {
		name        string
		oldTTL, ttl time.Duration
		meta        map[string]string
		want        string // metaKeptFrom, "" absent
	}{
		{"unchanged", 96 * time.Hour, 96 * time.Hour, nil, ""},
		{"lowered", 96 * time.Hour, 48 * time.Hour, nil, ""},
		{"raised", 96 * time.Hour, 120 * time.Hour, nil, at(-96 * time.Hour)},
		{"raised to forever", 96 * time.Hour, 0, nil, at(-96 * time.Hour)},
		{"from forever: nothing forgotten", 0, 96 * time.Hour, nil, ""},
		{"raised again: the later bound stays", 96 * time.Hour, 120 * time.Hour, map[string]string{metaKeptFrom: at(-time.Hour)}, at(-time.Hour)},
		{"an earlier raise, still bounding", 120 * time.Hour, 120 * time.Hour, map[string]string{metaKeptFrom: at(-100 * time.Hour)}, at(-100 * time.Hour)},
		{"an earlier raise, passed", 120 * time.Hour, 120 * time.Hour, map[string]string{metaKeptFrom: at(-121 * time.Hour)}, ""},
		{"an earlier raise, lowered past it", 120 * time.Hour, 48 * time.Hour, map[string]string{metaKeptFrom: at(-100 * time.Hour)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := map[string]string{"_nats.req.level": "1"}
			for k, v := range tc.meta {
				meta[k] = v
			}
			got := keptMetadata(tc.oldTTL, meta, tc.ttl, now)
			if got[metaKeptFrom] != tc.want {
				t.Errorf("kept from = %q, want %q", got[metaKeptFrom], tc.want)
			}
			if got["_nats.req.level"] != "1" {
				t.Errorf("the server's metadata was dropped: %v", got)
			}
		})
	}
}

// A serve restarted with a longer horizon does not make an operator
// command believe APPLIED remembers what expired under the shorter one:
// KeptFor is the time since the raise's bound until the new horizon has
// passed (review V: replay judged such events within the horizon).
func TestKeptForAfterTheHorizonWasRaised(t *testing.T) {
	s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), DontListen: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := &Conn{NC: nc, JS: j}
	ctx := t.Context()
	if _, _, err := ProvisionKV(ctx, j, KVConfig{Replicas: 1, Horizon: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if kept, err := KeptFor(ctx, c); err != nil || kept != time.Hour {
		t.Fatalf("horizon 1h: KeptFor = %s, %v; want 1h", kept, err)
	}
	raisedAt := time.Now()
	if _, _, err := ProvisionKV(ctx, j, KVConfig{Replicas: 1, Horizon: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	kept, err := KeptFor(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// The raise's bound: an hour before it; its record survives another
	// provisioning with the same horizon (a later restart).
	if lo, hi := time.Hour, time.Since(raisedAt)+time.Hour+time.Second; kept < lo || kept > hi {
		t.Fatalf("raised to 3h: KeptFor = %s, want about 1h (between %s and %s)", kept, lo, hi)
	}
	if _, _, err := ProvisionKV(ctx, j, KVConfig{Replicas: 1, Horizon: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if again, err := KeptFor(ctx, c); err != nil || again < kept || again > 2*time.Hour {
		t.Fatalf("provisioned again with 3h: KeptFor = %s, %v; want about %s still", again, err, kept)
	}
	kv, err := j.KeyValue(ctx, BucketApplied)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(ctx); err != nil || st.TTL() != 3*time.Hour {
		t.Fatalf("APPLIED's TTL after the raise: %v, %v", st, err)
	}
}
