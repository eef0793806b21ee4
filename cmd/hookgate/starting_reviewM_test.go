package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// reviewMGet GETs base+path and returns its status and body (0 on error).
func reviewMGet(base, path string) (int, string) {
	return reviewMGetWith(&http.Client{Timeout: 5 * time.Second}, base, path)
}

// reviewMGetWith is reviewMGet with the caller's client.
func reviewMGetWith(c *http.Client, base, path string) (int, string) {
	resp, err := c.Get(base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// reviewMStartingValue is hookgate_starting's value in a scrape ("" when
// absent).
func reviewMStartingValue(body string) string {
	m := regexp.MustCompile(`(?m)^hookgate_starting (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// hookgate_starting is 1 until serve takes webhooks: while the embedded
// gateway's key index opens (README: about 210 s at 10 M keys without a
// usable snapshot) webhooks and /readyz answer 503 and the "listening on"
// line is not printed, so the gauge stays 1 (review M: it went to 0 as
// soon as the handlers were handed over). Here the snapshot path is a
// FIFO nobody writes to, so the key index's open blocks, deterministically,
// where a long read-back would run; once the FIFO is opened for writing
// and closed, the index reads back and the gauge goes to 0.
func TestReviewMStartingIsOneWhileTheKeyIndexOpens(t *testing.T) {
	s, base, release := reviewMStuckKeyIndex(t)
	readyz, _ := reviewMGet(base, "/readyz")
	hook, _, err := review7Send(&http.Client{Timeout: 5 * time.Second}, base, "while-opening")
	if err != nil {
		t.Fatal(err)
	}
	code, body := reviewMGet(base, "/metrics")
	if hook != http.StatusServiceUnavailable || readyz != http.StatusServiceUnavailable || strings.Contains(s.stdout.String(), "listening on") {
		t.Fatalf("the key index is opening, yet webhooks answer %d, /readyz %d, stdout %q", hook, readyz, s.stdout.String())
	}
	if v := reviewMStartingValue(body); code != http.StatusOK || v != "1" {
		t.Fatalf("/metrics while webhooks still answer 503: %d, hookgate_starting %q, want 200 and 1", code, v)
	}
	release()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("hookgate_starting not 0 within 30 s of the key index's release\n%s", tail(s.stderr.String(), 1500))
		}
		if _, body := reviewMGet(base, "/metrics"); reviewMStartingValue(body) == "0" {
			break
		}
	}
	if !strings.Contains(s.stdout.String(), "listening on") {
		t.Fatalf("hookgate_starting 0 before the listening line: stdout %q", s.stdout.String())
	}
}

// reviewMStuckKeyIndex starts serve on a store kept by a key index whose
// snapshot path is a FIFO nobody writes to, so the key index's open
// blocks, deterministically, where a long read-back would run. It returns
// once serve says the key index is opening (its log line after 1 s), with
// serve's webhook base URL and release, which lets the open go on.
func reviewMStuckKeyIndex(t *testing.T) (s *review7Serve, base string, release func()) {
	t.Helper()
	dataDir, natsListen, httpListen := t.TempDir(), freeAddr(t), freeAddr(t)
	cfgPath := review7Config(t, dataDir, natsListen, httpListen, "")
	review7Store(t, cfgPath, 10).Close() // WEBHOOKS kept by a key index
	fifo := filepath.Join(dataDir, keyIndexFile)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	release = func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
	s = review7Start(t, cfgPath, false)
	// Runs before serve's stop (cleanups run last first), in case the
	// test ends before it released the FIFO itself.
	t.Cleanup(release)
	for end := time.Now().Add(30 * time.Second); !strings.Contains(s.stderr.String(), "key index opening"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the key index never said it was opening\n%s", tail(s.stderr.String(), 1500))
		}
	}
	return s, "http://" + httpListen, release
}

// A serve stopped (SIGTERM) while its key index opens never took a
// webhook: it must not log "hookgate started" on its way out (review E
// saw "hookgate started" just before "hookgate stopped"), nor print the
// "listening on" lines.
func TestServeStoppedWhileStartingDoesNotSayStarted(t *testing.T) {
	s, _, release := reviewMStuckKeyIndex(t)
	s.cancel()
	release()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve stopped with %v\n%s", err, tail(s.stderr.String(), 1500))
	}
	logs := s.stderr.String()
	if !strings.Contains(logs, `"msg":"hookgate stopped"`) {
		t.Fatalf("no \"hookgate stopped\" line\n%s", tail(logs, 1500))
	}
	if strings.Contains(logs, `"msg":"hookgate started"`) || strings.Contains(s.stdout.String(), "listening on") {
		t.Fatalf("stopped while starting, yet it said started: stdout %q\n%s", s.stdout.String(), tail(logs, 1500))
	}
}

// reviewMExternalStuckConfig writes a config on a NATS server whose
// JetStream never answers (serve stays in its starting phase).
func reviewMExternalStuckConfig(t *testing.T, httpBlock, roles string) string {
	t.Helper()
	url := review10aNoJetStream(t)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { %s }\nroles: { %s }\nnats: { url: %q }\n%s", httpBlock, roles, url, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Checked fine: while starting, the consumer-only role's listener (admin
// routes on http.listen) and the admin listener with http.admin_listen set
// serve /metrics from the registry (hookgate_starting 1 and the Go
// series); the webhook listener with admin_listen set answers 404.
func TestReviewMMetricsWhileStartingByRole(t *testing.T) {
	for _, tc := range []struct {
		name         string
		adminListen  bool
		roles        string
		webhooksPort bool
	}{
		{"consumer-only", false, "gateway: false, consumer: true", false},
		{"gateway admin_listen", true, "consumer: false", true},
		{"both roles admin_listen", true, "gateway: true, consumer: true", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen, admin := freeAddr(t), freeAddr(t)
			block := fmt.Sprintf("listen: %q", listen)
			if tc.adminListen {
				block += fmt.Sprintf(", admin_listen: %q", admin)
			} else {
				admin = listen
			}
			s := review7Start(t, reviewMExternalStuckConfig(t, block, tc.roles), false)
			review10aStartingBase(t, s)
			// The webhook listener's line comes first; the admin listener
			// opens right after it (a scrape between the two was refused;
			// CI): wait for it to answer.
			code, body := reviewMGet("http://"+admin, "/metrics")
			for end := time.Now().Add(10 * time.Second); code == 0 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				code, body = reviewMGet("http://"+admin, "/metrics")
			}
			if code != 200 || reviewMStartingValue(body) != "1" || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_start_time_seconds") {
				t.Errorf("admin /metrics while starting: %d\n%.500s", code, body)
			}
			if tc.webhooksPort {
				if code, _ := reviewMGet("http://"+listen, "/metrics"); code != 404 {
					t.Errorf("webhook port /metrics while starting with admin_listen: %d, want 404", code)
				}
			}
		})
	}
}

// Checked fine (run with -race): scrapes hammering /metrics through the
// whole start of an embedded serve with both roles, while the stream,
// audit, key index, consumer and gateway series are registered into the
// same registry, all answer 200, and hookgate_starting only goes 1 -> 0;
// once started, /metrics has the consumer's and gateway's series and
// hookgate_starting 0.
func TestReviewMScrapesDuringStartRace(t *testing.T) {
	dataDir, natsListen, httpListen := t.TempDir(), freeAddr(t), freeAddr(t)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: %q }\nroles: { gateway: true, consumer: true }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		httpListen, dataDir, natsListen, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "http://" + httpListen
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	var seen []string
	storeSeriesWhileStarting := 0 // README: "only the process's own series are there until then"
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body := reviewMGet(base, "/metrics")
				if code == 0 {
					time.Sleep(2 * time.Millisecond)
					continue // not listening yet
				}
				v := reviewMStartingValue(body)
				mu.Lock()
				if code != 200 || v == "" || (last == "0" && v == "1") {
					problems = append(problems, fmt.Sprintf("%d starting=%q after %q: %.200s", code, v, last, body))
				}
				if v != last {
					seen = append(seen, v)
				}
				if v == "1" && strings.Contains(body, "hookgate_audit_write_failures_total") {
					storeSeriesWhileStarting++
				}
				mu.Unlock()
				last = v
			}
		}()
	}
	s := review7Start(t, path, true)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(problems) > 0 {
		t.Errorf("%d bad scrapes, first: %s", len(problems), problems[0])
	}
	code, body := reviewMGet(s.base, "/metrics")
	for _, want := range []string{"hookgate_consumer_pending", "hookgate_jetstream_up 1", "hookgate_key_index_keys", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics once started (%d) lacks %s", code, want)
		}
	}
	if v := reviewMStartingValue(body); v != "0" {
		t.Errorf("hookgate_starting once started: %q", v)
	}
	t.Logf("hookgate_starting values seen in order per scraper: %v; scrapes with hookgate_starting 1 and the store's series: %d", seen, storeSeriesWhileStarting)
}
