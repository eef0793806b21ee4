package main

// Review AH: an operator changes the config and restarts `hookgate serve`
// (embedded server, one data_dir). Each test runs the real `run` twice on
// one data_dir with the config file edited in between.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func reviewAHWrite(t *testing.T, path, yaml string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReviewAHLoweredMaxBodyBytesStallsSubject: an operator lowers
// http.max_body_bytes (here 400000 -> 65536; `config check` passes) while a
// larger event, accepted under the old limit, waits to be applied. serve
// derived every stream's MaxMsgSize from max_body_bytes, so the event's
// GRANTS publish was refused ("message too large"), and so was its dead
// letter: it waited at the head of its subject for good, and every newer
// event of that subject waited behind it, nothing in DLQ, AUDIT or trace
// saying why (review AH, on the code before). GRANTS and DLQ now take any
// message the server does (and the embedded server's max payload is at
// least 8 MiB): the event accepted is applied, and the newer one after it.
//
// CONTRACT (Sequencing): "A failing event does not block its subject";
// the brief: "nothing accepted is ever lost".
func TestReviewAHLoweredMaxBodyBytesStallsSubject(t *testing.T) {
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	cfg := func(extra string) string {
		return fmt.Sprintf("nats: { embedded: { data_dir: %q } }\nconsumer: { max_deliver: 2, backoff: [100ms] }\n%s%s", dataDir, extra, review6Provider)
	}
	// Run 1: gateway only (the consumer is off, or behind), 400 kB bodies.
	reviewAHWrite(t, cfgPath, cfg("http: { listen: \"127.0.0.1:0\", max_body_bytes: 400000 }\nroles: { consumer: false }\n"))
	s := review7Start(t, cfgPath, true)
	big := fmt.Sprintf(`{"id":"big","grant_id":"g-1","at":"2026-12-01T10:00:00Z","pad":%q}`, strings.Repeat("x", 300000))
	if c := review9Post(t, s.base, "p", big); c != 200 {
		t.Fatalf("setup: big event answered %d", c)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}

	// Run 2: the limit lowered, the consumer on.
	reviewAHWrite(t, cfgPath, cfg("http: { listen: \"127.0.0.1:0\", max_body_bytes: 65536 }\n"))
	if r := review9Run(t, "", "config", "check", cfgPath); r.code != 0 {
		t.Fatalf("setup: edited config does not check: %+v", r)
	}
	s = review7Start(t, cfgPath, true)
	serveWaitFor(t, s, "the big event applied", func() bool { return reviewAHApplied(s) >= 1 })
	// A newer event of the same subject.
	if c := review9Post(t, s.base, "p", `{"id":"small","grant_id":"g-1","at":"2026-12-01T10:05:00Z"}`); c != 200 {
		t.Fatalf("small event answered %d", c)
	}
	serveWaitFor(t, s, "the newer event applied", func() bool { return reviewAHApplied(s) >= 2 })
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"p:default:evt:big", "p:default:evt:small"} {
		tr := review9Run(t, "", "trace", key, "--config", cfgPath)
		if !strings.Contains(tr.stdout, "applied") || strings.Contains(tr.stdout, "dead-lettered") {
			t.Errorf("%s not applied:\n%s", key, tr.stdout)
		}
	}
}

// reviewAHApplied is serve's count of applied events of provider p
// (/metrics; -1 when it cannot be read).
func reviewAHApplied(s *review7Serve) int {
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, `hookgate_consumer_events_total{decision="applied",provider="p"} `); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// TestReviewAHOrderingSwitchReplayAppliesAgain: a provider's ordering is
// switched (none -> watermark, or watermark -> none) and serve restarted;
// `hookgate replay` over events that were applied (and forwarded) under
// the old ordering applies and forwards each of them a second time. The
// new rule looks for applied keys only where it remembers them itself
// (GRANTS under watermark with the default template, APPLIED under none),
// and the old rule's record is elsewhere. For none -> watermark the dry run
// even says "already-applied" while the real run says "applied".
//
// CONTRACT (Command line, replay): "re-feeds stored events through the
// consumer rules ... never applies an event twice". README (Replay): "It
// never applies an event twice" and "A dry run ... judges each event as the
// real run would".
func TestReviewAHOrderingSwitchReplayAppliesAgain(t *testing.T) {
	for _, tc := range []struct{ from, to string }{{"none", "watermark"}, {"watermark", "none"}} {
		t.Run(tc.from+"-to-"+tc.to, func(t *testing.T) {
			var mu sync.Mutex
			forwards := map[string]int{}
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				forwards[r.Header.Get("Idempotency-Key")]++
				mu.Unlock()
			}))
			defer recv.Close()
			count := func() (keys, total int) {
				mu.Lock()
				defer mu.Unlock()
				for _, n := range forwards {
					total += n
				}
				return len(forwards), total
			}
			dataDir := t.TempDir()
			cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
			cfg := func(ordering string) string {
				return fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q } }\n%s    ordering: %s\n    effects: { forward: { url: %q } }\n",
					dataDir, review6Provider, ordering, recv.URL)
			}
			reviewAHWrite(t, cfgPath, cfg(tc.from))
			s := review7Start(t, cfgPath, true)
			for i := range 3 {
				review7MustSend(t, s.base, fmt.Sprintf("e%d", i), "accepted")
			}
			serveWaitFor(t, s, "3 events forwarded", func() bool { k, _ := count(); return k == 3 })
			if err := s.stop(t); err != nil {
				t.Fatal(err)
			}

			reviewAHWrite(t, cfgPath, cfg(tc.to))
			if r := review9Run(t, "", "config", "check", cfgPath); r.code != 0 {
				t.Fatalf("setup: edited config does not check: %+v", r)
			}
			// serve restarted with the new ordering, then stopped: the
			// operator's replay opens data_dir itself.
			s = review7Start(t, cfgPath, true)
			if err := s.stop(t); err != nil {
				t.Fatal(err)
			}
			dry := review9Run(t, "", "replay", "--dry-run", "--config", cfgPath)
			real := review9Run(t, "", "replay", "--config", cfgPath)
			_, total := count()
			if total != 3 {
				t.Errorf("replay after ordering %s -> %s forwarded applied events again: %d forwards for 3 events\ndry run:\n%s\nreal run:\n%s%s",
					tc.from, tc.to, total, dry.stdout, real.stdout, real.stderr)
			}
			if strings.Contains(real.stdout, "3 applied") {
				t.Errorf("replay applied all 3 events a second time:\n%s", real.stdout)
			}
			// The dry run and the real run say the same.
			for name, out := range map[string]string{"dry run": dry.stdout, "replay": real.stdout} {
				if !strings.Contains(out, "3 already-applied") {
					t.Errorf("%s after ordering %s -> %s:\n%s", name, tc.from, tc.to, out)
				}
			}
		})
	}
}
