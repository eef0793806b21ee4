package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// TestLoadAgainstNetHTTP runs the raw HTTP/1.1 client against net/http
// servers answering in each framing (Content-Length, chunked, close) and
// checks that signatures verify with hookgate's own scheme, ids are unique,
// redeliveries repeat earlier requests byte for byte, and statuses count.
func TestLoadAgainstNetHTTP(t *testing.T) {
	sch, err := gateway.NewScheme(gateway.SchemeHMACSHA256, gateway.SchemeOptions{Header: "X-Signature"})
	if err != nil {
		t.Fatal(err)
	}
	secret := config.Secret("s3cret")
	for _, framing := range []string{"length", "chunked", "close", "error"} {
		t.Run(framing, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string]int{}
			var bad []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var ev struct {
					ID string `json:"id"`
				}
				verr := sch.Verify(r.Header, body, []config.Secret{secret}, time.Now())
				jerr := json.Unmarshal(body, &ev)
				mu.Lock()
				if verr != nil || jerr != nil || ev.ID != r.Header.Get("X-Event-Id") || len(body) != 700 {
					bad = append(bad, fmt.Sprintf("verify %v, json %v, id %q/%q, %d bytes", verr, jerr, ev.ID, r.Header.Get("X-Event-Id"), len(body)))
				}
				seen[ev.ID]++
				dup := seen[ev.ID] > 1
				mu.Unlock()
				answer := `{"status":"accepted"}`
				if dup {
					answer = `{"status":"duplicate"}`
				}
				switch framing {
				case "chunked":
					w.WriteHeader(200)
					_, _ = io.WriteString(w, answer[:5])
					w.(http.Flusher).Flush()
					_, _ = io.WriteString(w, answer[5:])
				case "close":
					w.Header().Set("Connection", "close")
					_, _ = io.WriteString(w, answer)
				case "error":
					http.Error(w, "nope", http.StatusServiceUnavailable)
				default:
					_, _ = io.WriteString(w, answer)
				}
			}))
			defer srv.Close()
			res, err := Load(t.Context(), LoadOptions{
				Addr: strings.TrimPrefix(srv.URL, "http://"), Path: "/webhooks/x", Signer: sch, Secret: secret,
				Conns: 4, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond, BodySize: 700,
				Redeliver: 0.5, IDPrefix: "evt_t",
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				t.Fatalf("%d bad requests, first: %s", len(bad), bad[0])
			}
			if framing == "error" {
				if res.Sent == 0 || res.Errors != res.Sent || res.Statuses[503] != res.Sent {
					t.Fatalf("errors %d, 503s %d, sent %d: every 503 is an error", res.Errors, res.Statuses[503], res.Sent)
				}
				// An error is not throughput (a gateway answering 401 fast
				// must not look like one beating the floor).
				if res.Measured != 0 || res.RPS != 0 || res.Latency.Count() != 0 {
					t.Fatalf("503s counted as throughput: measured %d, rps %.0f, histogram %d", res.Measured, res.RPS, res.Latency.Count())
				}
				return
			}
			if res.Measured == 0 || res.RPS <= 0 || res.Latency.Count() != res.Measured {
				t.Fatalf("measured %d, rps %.0f, histogram %d", res.Measured, res.RPS, res.Latency.Count())
			}
			if res.Errors != 0 {
				t.Fatalf("%d errors, first: %s", res.Errors, res.FirstError)
			}
			var repeats int
			for _, n := range seen {
				repeats += n - 1
			}
			if uint64(repeats) != res.Duplicates || res.Accepted+res.Duplicates != res.Sent {
				t.Fatalf("server saw %d repeats; client counted %d duplicates, %d accepted of %d sent", repeats, res.Duplicates, res.Accepted, res.Sent)
			}
			// Each request is a redelivery with probability 0.5: allow five
			// standard deviations of the share for the count sent, which a
			// busy machine makes small.
			share, tol := float64(res.Duplicates)/float64(res.Sent), 5*math.Sqrt(0.25/float64(res.Sent))
			if math.Abs(share-0.5) > max(tol, 0.15) {
				t.Errorf("redelivery share %.2f of %d sent, want 0.5 +- %.2f", share, res.Sent, max(tol, 0.15))
			}
		})
	}
}

// TestLoadPaced checks the paced (open-loop) load: never more requests
// than the schedule has slots (a closed loop against this server would
// send thousands), and, the server answering at once, nearly all of them.
func TestLoadPaced(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	defer srv.Close()
	const conns, rate = 4, 200.0
	warmup, window := 100*time.Millisecond, 500*time.Millisecond
	res, err := Load(t.Context(), LoadOptions{
		Addr: strings.TrimPrefix(srv.URL, "http://"), Path: "/webhooks/x",
		Conns: conns, Warmup: warmup, Duration: window, BodySize: 300, IDPrefix: "evt_p", Rate: rate,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The schedule runs from the load's start, warm-up included: the
	// slots before its end are the first rate*(warmup+window) ones. How
	// many of them went out in time is the machine's business (a
	// benchmark's figure), never more than the schedule.
	if slots := uint64(rate * (warmup + window).Seconds()); res.Slots != slots {
		t.Fatalf("a schedule of %d slots at %.0f/s over %s, want %d", res.Slots, rate, warmup+window, slots)
	}
	if res.Errors != 0 || res.Sent == 0 || res.Sent > res.Slots {
		t.Fatalf("sent %d (errors %d, first %q): want some and at most the schedule's %d slots",
			res.Sent, res.Errors, res.FirstError, res.Slots)
	}
	if _, err := Load(t.Context(), LoadOptions{Addr: "127.0.0.1:1", Conns: 1, Duration: time.Millisecond, Rate: -1}); err == nil {
		t.Fatal("a negative rate was taken")
	}
}

// The connections share one schedule: slot k falls due k/rate after the
// start, each slot goes to exactly one connection, and none past the end.
// The pacer's start lies in the past here, so no slot waits: the test
// checks the hand-out, not the clock.
func TestPacerSharedSchedule(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	p := &pacer{start: start, end: start.Add(time.Second), rate: 200}
	if got := p.slots(); got != 200 {
		t.Fatalf("slots = %d, want 200", got)
	}
	for k, want := range map[uint64]time.Duration{0: 0, 1: 5 * time.Millisecond, 199: 995 * time.Millisecond} {
		if due, ok := p.due(k); !ok || due.Sub(start) != want {
			t.Errorf("slot %d due %s after the start (%t), want %s", k, due.Sub(start), ok, want)
		}
	}
	if _, ok := p.due(200); ok {
		t.Error("slot 200 falls due at the end, want none")
	}
	const conns = 4
	var wg sync.WaitGroup
	taken := make([]int, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, ok := p.wait(t.Context()); !ok {
					break
				}
				taken[i]++
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range taken {
		total += n
	}
	if total != 200 || p.next.Load() < 200 {
		t.Fatalf("the connections took %v slots (%d), want 200 between them", taken, total)
	}
	for _, tc := range []struct {
		rate float64
		span time.Duration
		want uint64
	}{{0, time.Second, 0}, {1e-10, time.Second, 1}, {3, time.Second, 3}, {3, 1001 * time.Millisecond, 4}, {0.5, 10 * time.Second, 5}} {
		p := &pacer{start: start, end: start.Add(tc.span), rate: tc.rate}
		if got := p.slots(); got != tc.want {
			t.Errorf("rate %g over %s: %d slots, want %d", tc.rate, tc.span, got, tc.want)
		}
	}
}

func TestBodySizeAndShape(t *testing.T) {
	for _, size := range []int{0, 100, 1024, 65536} {
		b := Body("evt_1", "G-1", time.Unix(1700000000, 5).UTC(), size)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if size > 200 && len(b) != size {
			t.Errorf("size %d: got %d bytes", size, len(b))
		}
		if v["id"] != "evt_1" || v["grant_id"] != "G-1" || v["occurred_at"] != "2023-11-14T22:13:20.000000005Z" {
			t.Errorf("size %d: fields %v", size, v)
		}
	}
}
