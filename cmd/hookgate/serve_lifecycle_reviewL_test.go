package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	js "github.com/nats-io/nats.go/jetstream"
)

// reviewLServeGoroutines is the stacks of the goroutines serve's own code
// started that are still running ("" when none).
func reviewLServeGoroutines() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, f := range []string{"main.watchStoreRecovery", "main.(*instanceReporter).run", "main.answerInstances", "main.serveOnce", "main.serveHTTP", "main.runServe"} {
			if strings.Contains(g, f+"(") || strings.Contains(g, f+".func") {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// A serve that fails after its store opened (the durable consumer cannot
// be made hookgate's: one of that name acknowledges nothing, and a
// consumer's ack policy cannot change) stops with the reason (it used to
// hang: the stop waited for goroutines that run until the run ends) and
// must, once run returns, have let go of everything:
// its HTTP port, data_dir's lock, its goroutines (the full-disk watcher,
// the status answerer). In-process, a leftover one of these would outlive
// the run.
func TestReviewLFailureAfterStoreOpenedReleasesEverything(t *testing.T) {
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	yaml := fmt.Sprintf("http: { listen: %q }\nnats: { embedded: { data_dir: %q } }\n%s", addr, dataDir, review6Provider)
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
			t.Fatalf("serve ended with %v, want the durable consumer's error naming it", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop within 30s:\n%s", tail(s.stderr.String(), 2000))
	}
	if l, err := net.Listen("tcp", addr); err != nil {
		t.Errorf("http.listen %s still held after run returned: %v", addr, err)
	} else {
		l.Close()
	}
	reviewLReleased(t, dataDir)
}

// The same after a plain stop (SIGTERM).
func TestReviewLStopReleasesEverything(t *testing.T) {
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.2:0\" }\nnats: { embedded: { data_dir: %q } }\n%s", dataDir, review6Provider)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, cfgPath, true)
	review7MustSend(t, s.base, "a1", "accepted")
	if err := s.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	reviewLReleased(t, dataDir)
}

// reviewLReleased checks, once run returned, that data_dir's lock is free
// and serve's goroutines are gone (within 5 s).
func reviewLReleased(t *testing.T, dataDir string) {
	t.Helper()
	if f, err := jetstream.LockDataDir(dataDir); err != nil {
		t.Errorf("data_dir's lock still held after run returned: %v", err)
	} else {
		f.Close()
	}
	var left string
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if left = reviewLServeGoroutines(); left == "" || time.Now().After(end) {
			break
		}
	}
	if left != "" {
		t.Errorf("serve's goroutines still running 5s after run returned:\n%s", left)
	}
}
