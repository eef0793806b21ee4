package main

// Review AM: the operator changes the config between two runs of `hookgate
// serve` (embedded server, one data_dir) while events accepted under the
// old config wait or were applied. Each test runs the real `run` on one
// data_dir with the config file edited in between.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

func reviewAMConfig(dataDir, extra, providers string) string {
	if !strings.Contains(extra, "consumer: {") {
		extra = "consumer: { max_deliver: 2, backoff: [100ms] }\n" + extra
	}
	return fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q } }\n%s%s", dataDir, extra, providers)
}

// reviewAMReceiver counts forwards by the body's "id" and keeps their order.
type reviewAMReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	order []string // body ids in the order forwarded
	keys  map[string][]string
	delay time.Duration
}

func reviewAMRecv(t *testing.T, delay time.Duration) *reviewAMReceiver {
	r := &reviewAMReceiver{keys: map[string][]string{}, delay: delay}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var b struct{ ID string }
		body, _ := io.ReadAll(req.Body)
		_ = json.Unmarshal(body, &b)
		time.Sleep(r.delay)
		r.mu.Lock()
		r.order = append(r.order, b.ID)
		r.keys[b.ID] = append(r.keys[b.ID], req.Header.Get("Idempotency-Key"))
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *reviewAMReceiver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// reviewAMGrants is GRANTS' message count from `status --json`.
func reviewAMGrants(t *testing.T, cfgPath string) int {
	r := review9Run(t, "", "status", "--json", "--config", cfgPath)
	var doc struct {
		Streams []struct {
			Name     string `json:"name"`
			Messages uint64 `json:"messages"`
		} `json:"streams"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	for _, s := range doc.Streams {
		if s.Name == "GRANTS" {
			return int(s.Messages)
		}
	}
	return -1
}

// TestReviewAMWorkersChangedWithEventsPending (holds): consumer.workers
// 8 -> 1 -> 32 across restarts, each stop made while events wait: every
// event is forwarded once, each subject's in order, and the durable
// consumer's MaxAckPending follows the config.
func TestReviewAMWorkersChangedWithEventsPending(t *testing.T) {
	recv := reviewAMRecv(t, 5*time.Millisecond)
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	cfg := func(extra string) string {
		return reviewAMConfig(dataDir, extra, review6Provider+fmt.Sprintf("    effects: { forward: { url: %q } }\n", recv.URL))
	}
	const subjects, per = 4, 30
	post := func(s *review7Serve, from, to int) {
		for i := from; i < to; i++ {
			for g := range subjects {
				body := fmt.Sprintf(`{"id":"g%d-%03d","grant_id":"g-%d","at":"2026-12-01T10:%02d:%02dZ"}`, g, i, g, i/60, i%60)
				if c := review9Post(t, s.base, "p", body); c != 200 {
					t.Fatalf("post answered %d", c)
				}
			}
		}
	}
	// Run 1: the gateway only, 8 workers configured.
	reviewAHWrite(t, cfgPath, cfg("roles: { consumer: false }\nconsumer: { workers: 8, max_deliver: 2, backoff: [100ms] }\n"))
	s := review7Start(t, cfgPath, true)
	post(s, 0, per)
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	// Run 2: one worker, stopped while events still wait.
	reviewAHWrite(t, cfgPath, cfg("consumer: { workers: 1, max_deliver: 2, backoff: [100ms] }\n"))
	s = review7Start(t, cfgPath, true)
	serveWaitFor(t, s, "some forwarded", func() bool { return recv.total() >= 10 })
	post(s, per, per+5)
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	// Run 3: 32 workers.
	reviewAHWrite(t, cfgPath, cfg("consumer: { workers: 32, max_deliver: 2, backoff: [100ms] }\n"))
	s = review7Start(t, cfgPath, true)
	post(s, per+5, per+10)
	all := subjects * (per + 10)
	serveWaitFor(t, s, "all forwarded", func() bool { return recv.total() >= all })
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	order := slices.Clone(recv.order)
	recv.mu.Unlock()
	last := map[string]string{}
	seen := map[string]bool{}
	for _, id := range order {
		if seen[id] {
			t.Errorf("%s forwarded twice", id)
		}
		seen[id] = true
		g := id[:2]
		if id <= last[g] {
			t.Errorf("%s forwarded after %s", id, last[g])
		}
		last[g] = id
	}
	if len(seen) != all {
		t.Errorf("%d of %d events forwarded", len(seen), all)
	}
	sys := review9Open(t, cfgPath)
	defer sys.Close()
	c, err := sys.conn.JS.Consumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := 32*16 + retryRoom; info.Config.MaxAckPending != want {
		t.Errorf("MaxAckPending %d after workers 32, want %d", info.Config.MaxAckPending, want)
	}
}

// TestReviewAMDataDirMoved (holds): data_dir renamed, or copied, between
// runs: serve starts on the new path with the waiting event applied, the
// keys still duplicates, the dead letter and the generated token intact.
func TestReviewAMDataDirMoved(t *testing.T) {
	for _, how := range []string{"renamed", "copied"} {
		t.Run(how, func(t *testing.T) {
			root := t.TempDir()
			oldDir := filepath.Join(root, "data")
			cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
			reviewAHWrite(t, cfgPath, reviewAMConfig(oldDir, "", review6Provider))
			s := review7Start(t, cfgPath, true)
			review7MustSend(t, s.base, "a", "accepted")
			if c := review9Post(t, s.base, "p", `{"id":"nosubject","at":"2026-12-01T10:00:00Z"}`); c != 200 {
				t.Fatalf("post %d", c)
			}
			serveWaitFor(t, s, "applied", func() bool { return reviewAHApplied(s) == 1 })
			if err := s.stop(t); err != nil {
				t.Fatal(err)
			}
			if n := reviewAMLetters(t, cfgPath); n != 1 {
				t.Fatalf("setup: %d letters", n)
			}
			reviewAHWrite(t, cfgPath, reviewAMConfig(oldDir, "roles: { consumer: false }\n", review6Provider))
			s = review7Start(t, cfgPath, true)
			review7MustSend(t, s.base, "b", "accepted")
			if err := s.stop(t); err != nil {
				t.Fatal(err)
			}
			token, err := os.ReadFile(filepath.Join(oldDir, jetstream.TokenFile))
			if err != nil {
				t.Fatal(err)
			}
			newDir := filepath.Join(root, "moved", "data")
			if err := os.MkdirAll(filepath.Dir(newDir), 0o750); err != nil {
				t.Fatal(err)
			}
			if how == "renamed" {
				err = os.Rename(oldDir, newDir)
			} else {
				err = os.CopyFS(newDir, os.DirFS(oldDir))
			}
			if err != nil {
				t.Fatal(err)
			}
			reviewAHWrite(t, cfgPath, reviewAMConfig(newDir, "", review6Provider))
			s = review7Start(t, cfgPath, true)
			serveWaitFor(t, s, "the waiting event applied", func() bool { return reviewAHApplied(s) == 1 })
			review7MustSend(t, s.base, "a", "duplicate")
			review7MustSend(t, s.base, "b", "duplicate")
			if strings.Contains(s.stdout.String()+s.stderr.String(), "snapshot") {
				t.Logf("serve on the moved data_dir said about the snapshot:\n%s", tail(s.stderr.String()+s.stdout.String(), 2000))
			}
			if err := s.stop(t); err != nil {
				t.Fatal(err)
			}
			if n := reviewAMLetters(t, cfgPath); n != 1 {
				t.Errorf("%d letters after the move, want 1", n)
			}
			if got, _ := os.ReadFile(filepath.Join(newDir, jetstream.TokenFile)); string(got) != string(token) {
				t.Errorf("token changed with the move")
			}
		})
	}
}

// reviewAMLetters is `dlq list`'s letter count (-1 on error).
func reviewAMLetters(t *testing.T, cfgPath string) int {
	r := review9Run(t, "", "dlq", "list", "--config", cfgPath)
	var n int
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if _, err := fmt.Sscanf(lines[len(lines)-1], "%d letters", &n); err != nil {
		return -1
	}
	return n
}

// TestReviewAMSyncSwitched (holds): nats.embedded.sync interval -> always
// -> interval across restarts, an event waiting at each switch: serve
// starts, the waiting event is applied, keys stay duplicates. (nats-server
// takes SyncAlways from the server's options each time it loads a stream,
// recovery included: server/stream.go, fsCfg.SyncAlways.)
func TestReviewAMSyncSwitched(t *testing.T) {
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	cfg := func(sync, extra string) string {
		return fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, sync: %s } }\n%s%s", dataDir, sync, extra, review6Provider)
	}
	applied := 0
	for i, sync := range []string{"interval", "always", "interval"} {
		// The gateway alone stores an event; the next run, on the other
		// sync, applies it.
		reviewAHWrite(t, cfgPath, cfg(sync, "roles: { consumer: false }\n"))
		s := review7Start(t, cfgPath, true)
		review7MustSend(t, s.base, fmt.Sprintf("s%d", i), "accepted")
		if err := s.stop(t); err != nil {
			t.Fatal(err)
		}
		next := []string{"always", "interval", "always"}[i]
		reviewAHWrite(t, cfgPath, cfg(next, ""))
		s = review7Start(t, cfgPath, true)
		applied++
		serveWaitFor(t, s, "the waiting event applied", func() bool { return reviewAHApplied(s) == 1 })
		for j := 0; j <= i; j++ {
			review7MustSend(t, s.base, fmt.Sprintf("s%d", j), "duplicate")
		}
		if err := s.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	if n := reviewAMGrants(t, cfgPath); n != applied {
		t.Errorf("GRANTS holds %d messages, want %d", n, applied)
	}
}
