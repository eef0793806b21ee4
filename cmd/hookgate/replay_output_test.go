package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A replay's line for an event is on stdout once the event is decided,
// not when the replay ends: its lines went into a table printed after the
// last event, so a 3000-event replay printed nothing for a minute, and
// one killed part way left no record of the events it had applied and
// forwarded. Here the replay is held in the second event's forward: the
// first event's line must be on stdout by then.
func TestReplayPrintsEachLineAsItsEventIsDecided(t *testing.T) {
	second := make(chan struct{})
	var secondOnce sync.Once
	release := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"e2"`) {
			secondOnce.Do(func() { close(second) })
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	held := true
	t.Cleanup(func() {
		if held {
			close(release)
		}
	})
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	// Gateway only: nothing applies the events until the replay.
	cfg := reviewAConfig(t, dataDir, natsAddr, "roles: { consumer: false }\n", fmt.Sprintf(`providers:
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    ordering: none
    effects: { forward: { url: %q, timeout: 60s }, publish: "" }
`, review6Secret, target.URL))
	s := review7Start(t, cfg, true)
	for _, id := range []string{"e1", "e2"} {
		if code := review9Post(t, s.base, "q", fmt.Sprintf(`{"id":%q}`, id)); code != 200 {
			t.Fatalf("post %s: %d", id, code)
		}
	}

	var stdout, stderr lockedBuf
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"replay", "--config", cfg}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	}()
	select {
	case <-second:
	case err := <-done:
		t.Fatalf("replay ended before forwarding e2: %v\n%s%s", err, stdout.String(), stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("replay did not forward e2 within 30 s\n%s%s", stdout.String(), stderr.String())
	}
	// e1's line is written before e2 is judged: no wait is needed.
	if got := replayLines(stdout.String())["q:default:evt:e1"]; got != "applied" {
		t.Errorf("while the replay forwards e2, stdout has no line saying e1 applied (got %q):\n%s", got, stdout.String())
	}
	held = false
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("replay: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if lines := replayLines(out); lines["q:default:evt:e1"] != "applied" || lines["q:default:evt:e2"] != "applied" ||
		!strings.HasPrefix(out, "SEQ  KEY") || !strings.HasSuffix(out, "replayed 2 events: 2 applied\n") {
		t.Errorf("replay's output:\n%s", out)
	}
}

// The lines printed one at a time stay a table: columns as wide as the
// widest cell so far, DECISION as wide as its longest word from the
// start, a longer key moving only the lines after it, no trailing spaces.
func TestReplayRowsAlignAsTheyGo(t *testing.T) {
	var b strings.Builder
	cleared := 0
	r := newReplayRows(&b, func() { cleared++ })
	r.fitSeq(12)
	r.row(9, "p:a:evt:x", "applied", "")
	r.row(10, "p:a:evt:y", "stale", "older than the watermark")
	r.row(11, "p:a:evt:longer", "already-applied", "found in GRANTS")
	r.row(12, "p:a:evt:z", "apply", "")
	r.end()
	want := "SEQ  KEY        DECISION         REASON\n" +
		"9    p:a:evt:x  applied\n" +
		"10   p:a:evt:y  stale            older than the watermark\n" +
		"11   p:a:evt:longer  already-applied  found in GRANTS\n" +
		"12   p:a:evt:z       apply\n"
	if b.String() != want {
		t.Errorf("lines:\n%s\nwant\n%s", b.String(), want)
	}
	if cleared != 4 {
		t.Errorf("the progress bar was cleared %d times for 4 lines", cleared)
	}

	var none strings.Builder
	newReplayRows(&none, nil).end()
	if want := "SEQ  KEY  DECISION  REASON\n"; none.String() != want {
		t.Errorf("no lines: %q, want the header %q", none.String(), want)
	}
}

// A note on the bar's terminal (a wait for a lease) takes the bar off its
// row first, and the next step draws the bar again below the note.
func TestProgressNoteTakesTheBarOff(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b, tty: true}
	p.step(300)
	p.note("hookgate: replay: event k waits")
	p.step(300)
	want := "\r[..............................] 1/300" + "\r" + strings.Repeat(" ", 38) + "\r" + "hookgate: replay: event k waits\n" + "\r[..............................] 2/300"
	if b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
}

// Under --provider the sequences a replay visits are sparse: SEQ is as
// wide as the stream's last sequence from the first line on. It was
// fitted to the first sequence plus the events to visit, and widened
// part way (review: e1 at seq 1, 2 events to visit, the next at seq 1001,
// wider than the header's "SEQ").
func TestReplayProviderRowsAlignAsTheyGo(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	provider := func(name string) string {
		return fmt.Sprintf("  %s:\n    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }\n    event_id: [\"json:/id\"]\n    ordering: none\n    effects: { publish: \"\" }\n", name, review6Secret)
	}
	cfg := reviewAConfig(t, dataDir, natsAddr, "roles: { consumer: false }\n", "providers:\n"+provider("q")+provider("r"))
	s := review7Start(t, cfg, true)
	post := func(p, id string) {
		if code := review9Post(t, s.base, p, fmt.Sprintf(`{"id":%q}`, id)); code != 200 {
			t.Fatalf("post %s %s: %d", p, id, code)
		}
	}
	post("q", "e1")
	for i := range 999 {
		post("r", fmt.Sprintf("r%d", i))
	}
	post("q", "e2")
	r := review9Run(t, "", "replay", "--dry-run", "--provider", "q", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "1 ") || !strings.HasPrefix(lines[2], "1001 ") {
		t.Fatalf("replay --provider q lines:\n%s\nwant seq 1 then 1001", r.stdout)
	}
	if a, b := strings.Index(lines[1], "q:"), strings.Index(lines[2], "q:"); a != b || strings.Index(lines[0], "KEY") != a {
		t.Errorf("KEY column at %d, %d and %d (header, seq 1, seq 1001): SEQ widened part way\n%s", strings.Index(lines[0], "KEY"), a, b, r.stdout)
	}
}

// What an interrupted event's line says depends on whether a forward may
// have run and on what stopped it (found by review: every one said a
// forward may have reached its receiver).
func TestInterruptedReason(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tt := range []struct {
		ctx      context.Context
		forwards bool
		want     string
	}{
		{cancelled, true, "stopped by the interrupt before it was decided: a forward under way may have reached its receiver;"},
		{cancelled, false, "stopped by the interrupt before it was decided; a rerun decides it"},
		{expired, false, "stopped at the command's time limit before it was decided; a rerun decides it"},
	} {
		if got := interruptedReason(tt.ctx, tt.forwards); !strings.HasPrefix(got, tt.want) {
			t.Errorf("interruptedReason(%v, %v) = %q, want it to start %q", tt.ctx.Err(), tt.forwards, got, tt.want)
		}
	}
}
