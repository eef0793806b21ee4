package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

// An event without a subject shows its key shard and who holds its lease,
// in the text and in --json, instead of a watermark it does not have.
func TestTraceShowsKeyShard(t *testing.T) {
	const key = "gh:default:dig:1"
	report := func(lease string) jetstream.TraceReport {
		return jetstream.TraceReport{Key: key, Provider: "gh", Account: "default",
			Watermark: &jetstream.WatermarkState{Key: "gh.=K.17", Shard: true, Exists: true, LeaseOwner: "host/1/x", LeaseKey: lease}}
	}
	for _, tt := range []struct{ lease, want string }{
		{key, "key shard  gh.=K.17: leased to this key"},
		{"gh:default:dig:2", "key shard  gh.=K.17: leased to gh:default:dig:2"},
		{"", "key shard  gh.=K.17: free"},
	} {
		var b bytes.Buffer
		writeTrace(&b, report(tt.lease), &config.Config{}, 0)
		if out := b.String(); !strings.Contains(out, tt.want) || strings.Contains(out, "watermark") {
			t.Errorf("lease %q: trace output lacks %q (or names a watermark):\n%s", tt.lease, tt.want, out)
		}
	}
	j, err := json.Marshal(newTraceDoc(report(key)))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"watermark":{"key":"gh.=K.17","shard":true,"exists":true,"keys":[],"key_at_mark":false,"lease_owner":"host/1/x","lease_key":"` + key + `"}`; !strings.Contains(string(j), want) {
		t.Errorf("--json lacks %s:\n%s", want, j)
	}
}

// A subject whose entry holds only a lease (its first event dead-lettered
// or waiting for its retry) says so instead of printing a zero time.
func TestTraceWatermarkWithoutAppliedEvent(t *testing.T) {
	r := jetstream.TraceReport{Key: "gg:default:evt:1", Provider: "gg", Account: "default",
		Watermark: &jetstream.WatermarkState{Key: "gg.default.G-2", Exists: true}}
	var b bytes.Buffer
	writeTrace(&b, r, &config.Config{}, 0)
	if out := b.String(); !strings.Contains(out, "gg.default.G-2: no event applied yet") || strings.Contains(out, "0001-01-01") {
		t.Errorf("trace output:\n%s", out)
	}
}

// Under ordering none the subject's entry holds only the lease its
// effects run under: trace says so, not "no event applied yet" next to the
// applied event it has just shown (review R).
func TestTraceUnorderedSubjectShowsItsLease(t *testing.T) {
	cfg := &config.Config{Providers: map[string]config.Provider{"gh": {Name: "gh", Ordering: config.OrderingNone}}}
	for _, tt := range []struct{ lease, want string }{
		{"", "subject lease  gh.acme.o=2Fr: free (ordering none: no watermark time)"},
		{"gh:acme:evt:2", "subject lease  gh.acme.o=2Fr: leased to gh:acme:evt:2"},
	} {
		r := jetstream.TraceReport{Key: "gh:acme:evt:1", Provider: "gh", Account: "acme",
			Watermark: &jetstream.WatermarkState{Key: "gh.acme.o=2Fr", Exists: true, LeaseKey: tt.lease}}
		var b bytes.Buffer
		writeTrace(&b, r, cfg, 0)
		if out := b.String(); !strings.Contains(out, tt.want) || strings.Contains(out, "no event applied yet") || strings.Contains(out, "\nwatermark") {
			t.Errorf("lease %q: trace output lacks %q (or speaks of a watermark):\n%s", tt.lease, tt.want, out)
		}
	}
}

// A subject with a control byte (stored raw by an older version, or read
// back exact from its quoted form) is printed Go-quoted: raw, a newline
// would break trace's table.
func TestTracePrintsControlBytesQuoted(t *testing.T) {
	r := jetstream.TraceReport{Key: "gg:default:evt:1", Provider: "gg", Account: "default",
		Stored: []jetstream.StoredEvent{{Seq: 1, Subject: "webhooks.gg.default", EventSubject: "G\n4", Type: "award\r\nx"}}}
	var b bytes.Buffer
	writeTrace(&b, r, &config.Config{}, 0)
	out := b.String()
	if !strings.Contains(out, `subject "G\n4", type "award\r\nx"`) || strings.Contains(out, "G\n4") {
		t.Errorf("trace output:\n%s", out)
	}
}

// An absent mark says it may have been pruned, so an operator who finds
// an old event's subject without a watermark knows where to look.
func TestTraceAbsentWatermarkMentionsPrune(t *testing.T) {
	r := jetstream.TraceReport{Key: "gg:default:evt:1", Provider: "gg", Account: "default",
		Watermark: &jetstream.WatermarkState{Key: "gg.default.G-2"}}
	var b bytes.Buffer
	writeTrace(&b, r, &config.Config{}, 0)
	if out := b.String(); !strings.Contains(out, "gg.default.G-2: none (no event of the subject applied, or pruned: see AUDIT watermark-pruned)") {
		t.Errorf("trace output:\n%s", out)
	}
}

// The until-when of an applied event is counted as replay counts it: from
// the newest stored event's Hookgate-Received-At (or, without one, its
// stored time), by the horizon replay judges by; not from the GRANTS
// publish or the APPLIED write, by the config's dedup.horizon.
func TestTraceUntilCountsAsReplayDoes(t *testing.T) {
	stored := time.Date(2026, 12, 5, 3, 32, 51, 883_400_000, time.UTC)
	received := stored.Add(-2 * time.Millisecond)
	cfg := &config.Config{Dedup: config.Dedup{Horizon: time.Hour}}
	for _, tt := range []struct {
		name     string
		received time.Time
		want     string
	}{
		{"received", received, "2026-12-05T03:33:11.881Z"},
		{"no Hookgate-Received-At", time.Time{}, "2026-12-05T03:33:11.883Z"},
	} {
		for _, in := range []string{jetstream.StreamGrants, jetstream.BucketApplied} {
			r := jetstream.TraceReport{Key: "gg:default:evt:1", Provider: "gg", Account: "default",
				Stored: []jetstream.StoredEvent{
					{Seq: 1, Subject: "webhooks.gg.default", Time: stored.Add(-time.Hour), ReceivedAt: received.Add(-time.Hour)},
					{Seq: 7, Subject: "webhooks.gg.default", Time: stored, ReceivedAt: tt.received},
				},
				Grants:  []jetstream.GrantEntry{{Seq: 3, Subject: "grants.gg.G-1.t", Time: stored.Add(5 * time.Second)}},
				Applied: jetstream.AppliedState{In: in, BucketExists: true, Remembered: true, Since: stored.Add(5 * time.Second)},
			}
			var b bytes.Buffer
			writeTrace(&b, r, cfg, 20*time.Second)
			source := "GRANTS"
			if in == jetstream.BucketApplied {
				source = "APPLIED"
			}
			line := regexp.MustCompile(`(?m)^\S+\s+` + source + `\s.*$`).FindString(b.String())
			if want := "a replay reports it already-applied until " + tt.want; !strings.HasSuffix(line, want) {
				t.Errorf("%s, remembered in %s: the %s line is %q, want it to end %q\n%s", tt.name, in, source, line, want, b.String())
			}
		}
	}
}

// TestTraceUntilIsWhenReplaySaysBeyondHorizon: trace said of an applied
// event "a replay reports it already-applied until T", T its GRANTS
// publish (or APPLIED write) plus the config's dedup.horizon, while
// replay counts from the stored event by the horizon it judges by, the
// system's where shorter: with a 20 s horizon, at one moment replay said
// beyond-horizon and trace a T 7 s later. Here trace runs with a config
// whose dedup.horizon (1h) is longer than the running system's (8s), and
// replay, polled, must say already-applied up to T and beyond-horizon
// after it, for an event remembered in GRANTS and one in APPLIED.
func TestTraceUntilIsWhenReplaySaysBeyondHorizon(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	providers := fmt.Sprintf(`providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/at"
  q:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: [%q] }
    event_id: ["json:/id"]
    ordering: none
`, review6Secret, review6Secret)
	const horizon = 8 * time.Second
	live := reviewAConfig(t, dataDir, natsAddr, "dedup: { horizon: 8s, window: 1s }\n", providers)
	other := reviewAConfig(t, dataDir, natsAddr, "dedup: { horizon: 1h, window: 1s }\n", providers)
	s := review7Start(t, live, true)
	keys := map[string]string{"p:default:evt:a": "GRANTS", "q:default:evt:b": "APPLIED"}
	if code := review9Post(t, s.base, "p", `{"id":"a","grant_id":"G-1","at":"2026-11-30T11:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	if code := review9Post(t, s.base, "q", `{"id":"b"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}

	until := map[string]time.Time{}
	for key, source := range keys {
		// APPLIED forgets the key after 8 s: trace it before.
		line := regexp.MustCompile(`(?m)^\S+\s+` + source + `\s.*a replay reports it already-applied until (\S+)$`)
		var r review9Result
		for end := time.Now().Add(6 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r = review9Run(t, "", "trace", key, "--config", other)
			if line.MatchString(r.stdout) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("setup: trace %s shows no %s line saying until when within 6 s\n%s%s", key, source, r.stdout, r.stderr)
			}
		}
		at, err := time.Parse(time.RFC3339Nano, line.FindStringSubmatch(r.stdout)[1])
		if err != nil {
			t.Fatal(err)
		}
		until[key] = at
		if !strings.Contains(r.stderr, "the system remembers applied keys for 8s") {
			t.Errorf("trace with a config whose dedup.horizon is longer than the system keeps keys: stderr does not say so:\n%s", r.stderr)
		}
		j := review9Run(t, "", "trace", key, "--json", "--config", other)
		var doc traceDoc
		if err := json.Unmarshal([]byte(j.stdout), &doc); err != nil || len(doc.Stored) != 1 || doc.Stored[0].ReceivedAt == nil {
			t.Fatalf("trace --json: %v\n%s%s", err, j.stdout, j.stderr)
		}
		if want := doc.Stored[0].ReceivedAt.Add(horizon).Truncate(time.Millisecond); !at.Equal(want) {
			t.Errorf("%s: trace says already-applied until %s, want %s: its Hookgate-Received-At %s plus the system's horizon 8s\n%s",
				key, at.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), doc.Stored[0].ReceivedAt.Format(time.RFC3339Nano), r.stdout)
		}
	}

	// Replay's decisions on either side of T: a decision made in a run
	// started after T+1ms (T is printed rounded down to the millisecond)
	// cannot be already-applied, nor one in a run ended by T
	// beyond-horizon.
	seen := map[string]bool{}
	for end := time.Now().Add(30 * time.Second); len(seen) < len(keys); time.Sleep(50 * time.Millisecond) {
		start := time.Now()
		r := review9Run(t, "", "replay", "--dry-run", "--config", live)
		ended := time.Now()
		for key, d := range reviewVDecisions(r.stdout) {
			switch T := until[key]; d {
			case "already-applied":
				if start.After(T.Add(time.Millisecond)) {
					t.Fatalf("%s: replay started %s said already-applied; trace said until %s", key, start.Format(time.RFC3339Nano), T.Format(time.RFC3339Nano))
				}
			case "beyond-horizon":
				seen[key] = true
				if !ended.After(T) {
					t.Fatalf("%s: replay ended %s said beyond-horizon; trace said already-applied until %s", key, ended.Format(time.RFC3339Nano), T.Format(time.RFC3339Nano))
				}
			default:
				t.Fatalf("%s: replay decided %q\n%s%s", key, d, r.stdout, r.stderr)
			}
		}
		if time.Now().After(end) {
			t.Fatalf("replay did not say beyond-horizon of both events within 30 s: %v", seen)
		}
	}
}

// A gateway-only deployment whose events nothing applies: trace says no
// consumer exists and what applies them, where it said nothing of it
// (its timeline ended at "accepted"). Once a consumer exists the line
// says where it stands instead.
func TestTraceSaysWhenNoConsumerExists(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := reviewAConfig(t, dataDir, natsAddr, "roles: { consumer: false }\n", review6Provider)
	s := review7Start(t, cfg, true)
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-12-05T10:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	r := review9Run(t, "", "trace", "p:default:evt:e1", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("trace: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	line := regexp.MustCompile(`(?m)^consumer\s.*$`).FindString(r.stdout)
	if !strings.Contains(line, "WEBHOOKS has no consumer hookgate-apply: no serve with the consumer role (roles.consumer) has run on this store") {
		t.Errorf("trace of an event no consumer exists for: consumer line %q, want it to say so\n%s", line, r.stdout)
	}
	j := review9Run(t, "", "trace", "p:default:evt:e1", "--json", "--config", cfg)
	if !strings.Contains(j.stdout, `"consumer": "WEBHOOKS has no consumer hookgate-apply`) {
		t.Errorf("trace --json: no consumer field saying none exists\n%s", j.stdout)
	}
}
