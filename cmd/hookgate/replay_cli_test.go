package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What an operator's command decides is the operator's in AUDIT: an event
// `replay` applies and one it finds stale are recorded with actor
// operator, like its replayed records (they said consumer, as if serve's
// consumer had decided; review V). serve's own decisions stay consumer's
// (e2e TestStatusAndTrace).
func TestReplayDecisionsAreTheOperators(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := review7Config(t, dataDir, natsAddr, "", "") // gateway only: nothing applies until the replay
	s := review7Start(t, cfg, true)
	for _, body := range []string{
		`{"id":"new","grant_id":"G-1","at":"2026-11-30T11:00:00Z"}`,
		`{"id":"old","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`,
	} {
		if code := review6Post(t, s.base, body); code != 200 {
			t.Fatalf("post %s: %d", body, code)
		}
	}
	if r := review9Run(t, "", "replay", "--config", cfg); r.code != 0 {
		t.Fatalf("replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for key, decision := range map[string]string{"p:default:evt:new": "applied", "p:default:evt:old": "stale"} {
		var actors map[string]string
		for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r := review9Run(t, "", "trace", key, "--json", "--config", cfg)
			var doc traceDoc
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatalf("trace --json: %v\n%s%s", err, r.stdout, r.stderr)
			}
			actors = map[string]string{}
			for _, a := range doc.Audit {
				actors[a.Decision] = a.Actor
			}
			if actors[decision] != "" && actors["replayed"] != "" {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%s: AUDIT has no %s and replayed records within 15 s: %v", key, decision, actors)
			}
		}
		if actors[decision] != "operator" || actors["replayed"] != "operator" {
			t.Errorf("%s: AUDIT actors %v; want %s and replayed both by operator", key, actors, decision)
		}
	}
}

// `replay --until T` with T in whole seconds, as `dlq list`, `status` and
// `trace` print times, takes in the events stored later in that second:
// copied from the listing of the last event wanted, it left that very
// event out (review V).
func TestReplayUntilAWholeSecondTakesItIn(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := review7Config(t, dataDir, natsAddr, "", "")
	s := review7Start(t, cfg, true)
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-11-30T11:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	r := review9Run(t, "", "trace", "p:default:evt:e1", "--json", "--config", cfg)
	var doc traceDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Stored) != 1 {
		t.Fatalf("trace --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	stored := doc.Stored[0].Time
	if stored.Nanosecond() == 0 {
		t.Skip("stored at a whole second: nothing to tell apart")
	}
	until := stored.UTC().Format(time.RFC3339) // whole seconds, before the event's own time
	r = review9Run(t, "", "replay", "--dry-run", "--until", until, "--config", cfg)
	if d := reviewVDecisions(r.stdout)["p:default:evt:e1"]; d != "apply" {
		t.Errorf("replay --until %s (the second the event was stored in, at %s): decision %q, want apply\n%s%s",
			until, stored.Format(time.RFC3339Nano), d, r.stdout, r.stderr)
	}
	// A time to the nanosecond means that instant. (All nine digits:
	// RFC3339Nano drops trailing zeros, and a time given with fewer
	// digits covers the whole of its last one.)
	before := stored.Add(-time.Nanosecond).UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
	if r := review9Run(t, "", "replay", "--dry-run", "--until", before, "--config", cfg); !strings.Contains(r.stdout, "0 events") {
		t.Errorf("replay --until %s, a nanosecond before the event was stored: want it left out\n%s%s", before, r.stdout, r.stderr)
	}
}

// `replay --until T` with T as `trace` prints times, to the millisecond,
// takes in the events stored in that millisecond: `--since T --until T`
// with the time of the event's WEBHOOKS line replayed 0 events, since
// only whole seconds were widened.
func TestReplayUntilAsTracePrintsItTakesItIn(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := review7Config(t, dataDir, natsAddr, "", "")
	s := review7Start(t, cfg, true)
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-11-30T11:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	r := review9Run(t, "", "trace", "p:default:evt:e1", "--config", cfg)
	m := regexp.MustCompile(`(?m)^(\S+)\s+WEBHOOKS\s+\d+\s+stored\s`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("trace: no WEBHOOKS line\n%s%s", r.stdout, r.stderr)
	}
	at := m[1]
	printed, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		t.Fatalf("trace printed the time %q: %v", at, err)
	}
	r = review9Run(t, "", "trace", "p:default:evt:e1", "--json", "--config", cfg)
	var doc traceDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Stored) != 1 {
		t.Fatalf("trace --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if doc.Stored[0].Time.Equal(printed) {
		t.Skip("stored at a whole millisecond: nothing to tell apart")
	}
	r = review9Run(t, "", "replay", "--dry-run", "--since", at, "--until", at, "--config", cfg)
	if d := reviewVDecisions(r.stdout)["p:default:evt:e1"]; d != "apply" {
		t.Errorf("replay --since %s --until %s (the time trace printed for the event, stored at %s): decision %q, want apply\n%s%s",
			at, at, doc.Stored[0].Time.Format(time.RFC3339Nano), d, r.stdout, r.stderr)
	}
	// The millisecond before is not the event's.
	before := printed.Add(-time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if r := review9Run(t, "", "replay", "--dry-run", "--until", before, "--config", cfg); !strings.Contains(r.stdout, "0 events") {
		t.Errorf("replay --until %s, the millisecond before the event's: want it left out\n%s%s", before, r.stdout, r.stderr)
	}
}

// untilSpan covers the rest of the last digit given.
func TestReplayUntilSpan(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"2026-12-05T03:23:59Z", time.Second - time.Nanosecond},
		{"2026-12-05T04:23:59+01:00", time.Second - time.Nanosecond},
		{"2026-12-05T03:23:59.883Z", time.Millisecond - time.Nanosecond},
		{"2026-12-05T03:23:59,883Z", time.Millisecond - time.Nanosecond},
		{"2026-12-05T04:23:59.8+01:00", 100*time.Millisecond - time.Nanosecond},
		{"2026-12-05T03:23:59.883000001Z", 0},
		{"2026-12-05T03:23:59.8830000012Z", 0}, // past nanoseconds: Go drops the rest
		{"2h", 0},
		{"", 0},
	} {
		if got := untilSpan(tt.in); got != tt.want {
			t.Errorf("untilSpan(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// replayLines reads a replay's table (SEQ KEY DECISION REASON) into key ->
// its decision and reason, one space between them.
func replayLines(out string) map[string]string {
	rows := map[string]string{}
	re := regexp.MustCompile(`^\d+\s+(\S+)\s+(\S+)(?:\s+(.*))?$`)
	for _, line := range strings.Split(out, "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			rows[m[1]] = strings.TrimSpace(m[2] + " " + m[3])
		}
	}
	return rows
}

// A dry run says of an already-applied event that --redeliver has nothing
// to run again for what the real run says: its line read
// "already-applied" with no reason, the real run's "already-applied  no
// forward effect configured to redeliver".
func TestReplayDryRunRedeliverWithoutForwardSaysWhy(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := review7Config(t, dataDir, natsAddr, "", "") // provider p publishes, forwards nothing
	s := review7Start(t, cfg, true)
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-11-30T11:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	if r := review9Run(t, "", "replay", "--config", cfg); r.code != 0 || replayLines(r.stdout)["p:default:evt:e1"] != "applied" {
		t.Fatalf("setup: replay: exit %d, want e1 applied\n%s%s", r.code, r.stdout, r.stderr)
	}
	const want = "already-applied no forward effect configured to redeliver"
	dry := review9Run(t, "", "replay", "--dry-run", "--redeliver", "--config", cfg)
	done := review9Run(t, "", "replay", "--redeliver", "--config", cfg)
	if got := replayLines(done.stdout)["p:default:evt:e1"]; got != want {
		t.Fatalf("setup: replay --redeliver: e1 %q, want %q\n%s%s", got, want, done.stdout, done.stderr)
	}
	if got := replayLines(dry.stdout)["p:default:evt:e1"]; got != want {
		t.Errorf("replay --dry-run --redeliver: e1 %q, want what the real run says, %q\n%s%s", got, want, dry.stdout, dry.stderr)
	}
}
