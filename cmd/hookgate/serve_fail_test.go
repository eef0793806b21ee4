package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	js "github.com/nats-io/nats.go/jetstream"
)

// A serve that fails after its event store opened (here the durable
// consumer cannot be made hookgate's: one of that name acknowledges
// nothing, and a consumer's ack policy cannot change) stops with the
// reason. It used to hang: the stop waited for the goroutines that run
// until the run ends (the full-disk watcher, the status answerer), and the
// run had not ended.
func TestServeFailingAfterTheStoreOpenedStops(t *testing.T) {
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q } }\n%s", dataDir, review6Provider)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	sys := review7Store(t, cfgPath, 1)
	if _, err := sys.conn.JS.CreateOrUpdateConsumer(t.Context(), jetstream.StreamWebhooks, js.ConsumerConfig{
		Durable: jetstream.DurableApply, AckPolicy: js.AckNonePolicy,
	}); err != nil {
		t.Fatal(err)
	}
	sys.Close()

	s := review7Start(t, cfgPath, false)
	select {
	case err := <-s.done:
		s.done <- err
		if err == nil || !strings.Contains(err.Error(), jetstream.DurableApply) {
			t.Fatalf("serve ended with %v, want the durable consumer's error", err)
		}
		t.Logf("serve stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve neither started nor stopped within 30s of a failure after its store opened:\n%s", tail(s.stderr.String(), 2000))
	}
}
