// Package jstest starts real embedded JetStream servers for tests in other
// packages. Nothing here is mocked: it is the same server and provisioning
// hookgate runs.
package jstest

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// Streams is a small, fast stream config for tests.
func Streams() jetstream.StreamsConfig {
	lim := jetstream.Limits{MaxAge: 24 * time.Hour, MaxBytes: 1 << 30}
	return jetstream.StreamsConfig{
		Replicas: 1, Horizon: time.Hour, DedupWindow: time.Minute, MaxMsgSize: 2 << 20,
		Webhooks: lim, Grants: lim, DLQ: lim, Audit: lim,
	}
}

// Env is a running embedded server with streams and KV provisioned.
type Env struct {
	Dir      string
	Embedded *jetstream.Embedded
	Conn     *jetstream.Conn
	Marks    *jetstream.Watermarks
	Applied  *jetstream.AppliedKeys
}

// Start runs an embedded server in a temp dir (or dir, when not empty),
// provisions everything, and stops it at cleanup.
func Start(t testing.TB, dir string) *Env {
	t.Helper()
	return StartWith(t, dir, Streams())
}

// ShortGrantsWindow is Streams with the least duplicate window the server
// allows on GRANTS (100 ms), as serve sets dedup.window there when every
// rule publishes the sequenced way: a repeat publish a test makes later
// than that is not caught by Nats-Msg-Id.
func ShortGrantsWindow() jetstream.StreamsConfig {
	c := Streams()
	c.GrantsWindow = 100 * time.Millisecond
	return c
}

// StartWith is Start with the streams configured by streams.
func StartWith(t testing.TB, dir string, streams jetstream.StreamsConfig) *Env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: dir, MaxPayload: 4 << 20})
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: t.Name(), Embedded: e})
	if err != nil {
		e.Shutdown()
		t.Fatalf("connect: %v", err)
	}
	env := &Env{Dir: dir, Embedded: e, Conn: c}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			c.Close()
			e.Shutdown()
		}
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := jetstream.Provision(ctx, c.JS, streams); err != nil {
		t.Fatalf("provision: %v", err)
	}
	env.Marks, env.Applied, err = jetstream.ProvisionKV(ctx, c.JS, jetstream.KVConfig{Replicas: 1, Horizon: time.Hour})
	if err != nil {
		t.Fatalf("provision kv: %v", err)
	}
	return env
}
