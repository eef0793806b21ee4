package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// TestStatusProblems: what needs a person is listed first, a line each,
// and only that: a healthy system says none.
func TestStatusProblems(t *testing.T) {
	healthy := func() jetstream.Status {
		return jetstream.Status{
			At: time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC),
			Streams: []jetstream.StreamStatus{
				{Name: "WEBHOOKS", Exists: true, Bytes: 50, MaxBytes: 100},
				{Name: "GRANTS", Exists: true, Bytes: 10, MaxBytes: 100},
				{Name: "DLQ", Exists: true, MaxBytes: 100},
				{Name: "AUDIT", Exists: true, Bytes: 99, MaxBytes: 100}, // ages out its oldest: fine
			},
			Buckets:   []jetstream.BucketStatus{{Name: "WATERMARKS", Exists: true}, {Name: "APPLIED", Exists: true}},
			Consumers: []jetstream.ConsumerStatus{{Stream: "WEBHOOKS", Name: "hookgate-apply", Exists: true}},
		}
	}
	ready := instancesView{Docs: []instanceDoc{{Instance: "host/1/a", Ready: true}}}
	if got := statusProblems(healthy(), ready); len(got) != 0 {
		t.Errorf("healthy: problems %q, want none", got)
	}
	var out bytes.Buffer
	writeStatus(&out, healthy(), viaListen, &config.Config{}, nil, ready)
	if !strings.Contains(out.String(), "PROBLEMS   none") {
		t.Errorf("healthy status text lacks \"PROBLEMS   none\":\n%s", out.String())
	}

	st := healthy()
	st.Streams[0].Bytes = 95       // WEBHOOKS near full: 503s soon
	st.Streams[2].Messages = 3     // dead letters
	st.Streams[1].Exists = false   // GRANTS missing
	st.Buckets[1].Exists = false   // APPLIED missing
	st.Consumers[0].Exists = false // nothing applies
	notReady := instancesView{Docs: []instanceDoc{{Instance: "host/1/a", Ready: false, Problem: "not connected to NATS (reconnecting)"}}}
	got := statusProblems(st, notReady)
	want := []string{
		"instance host/1/a not ready: not connected to NATS (reconnecting)",
		"stream WEBHOOKS at 95.0% of its max_bytes (retention.webhooks.max_bytes, read at start: raise it and restart serve): once full, webhooks are answered 503",
		"stream GRANTS missing",
		"bucket APPLIED missing",
		"consumer WEBHOOKS/hookgate-apply missing: nothing applies events",
		"3 dead letters in DLQ (hookgate dlq list)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%q\nwant\n%q", got, want)
	}
	retrying := healthy()
	retrying.Consumers[0].NumRedelivered = 7 // a receiver refusing: events wait for their retry
	if got := statusProblems(retrying, ready); len(got) != 1 || !strings.HasPrefix(got[0], "7 events delivered again and not yet settled") {
		t.Errorf("events waiting for a retry: problems %q, want the line naming them", got)
	}
	if got := statusProblems(healthy(), instancesView{None: "no serve runs (status opened data_dir itself)"}); !slices.Equal(got, []string{"no serve answered: no serve runs (status opened data_dir itself)"}) {
		t.Errorf("no serve: problems %q", got)
	}
	out.Reset()
	writeStatus(&out, st, viaListen, &config.Config{}, nil, notReady)
	if !strings.Contains(out.String(), "PROBLEMS\n  - instance host/1/a not ready") || !strings.Contains(out.String(), "  - 3 dead letters in DLQ") {
		t.Errorf("status text does not list the problems first:\n%s", out.String())
	}
}

// TestStatusProblemsAgingOut: an event still unapplied past half of
// WEBHOOKS's max_age is a problem (at max_age it is deleted unapplied;
// review AS), before that it is lag.
func TestStatusProblemsAgingOut(t *testing.T) {
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	st := jetstream.Status{
		At:        now,
		Streams:   []jetstream.StreamStatus{{Name: "WEBHOOKS", Exists: true, MaxAge: 720 * time.Hour}},
		Consumers: []jetstream.ConsumerStatus{{Stream: "WEBHOOKS", Name: "hookgate-apply", Exists: true, NumPending: 5, NumWaiting: 1}}, // a consumer pulls
	}
	ready := instancesView{Docs: []instanceDoc{{Instance: "h/1", Ready: true}}}
	for _, tc := range []struct {
		stored time.Time
		want   bool
	}{
		{time.Time{}, false},               // nothing waits
		{now.Add(-100 * time.Hour), false}, // lag, far from max_age
		{now.Add(-361 * time.Hour), true},  // past half of 30 d
		{now.Add(-719 * time.Hour), true},  // an hour left
	} {
		st.Consumers[0].OldestUnapplied = tc.stored
		got := statusProblems(st, ready)
		if has := len(got) == 1 && strings.Contains(got[0], "oldest unapplied event was stored") && strings.Contains(got[0], "retention.webhooks.max_age"); has != tc.want {
			t.Errorf("oldest unapplied stored %s: problems %q, want the aging-out line: %v", tc.stored, got, tc.want)
		}
	}
	st.Consumers[0].OldestUnapplied = now.Add(-719 * time.Hour)
	if got := statusProblems(st, ready); len(got) != 1 || !strings.Contains(got[0], "lost at 2026-12-04T04:00:00Z") {
		t.Errorf("problems %q: want the time it is lost", got)
	}
}

// TestStatusProblemsNobodyApplies: serves with the consumer role answered
// and none applies events (all standing by, the lock stuck): a problem;
// one applying, or only gateways answering: none.
func TestStatusProblemsNobodyApplies(t *testing.T) {
	st := jetstream.Status{At: time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)}
	standby := instanceDoc{Instance: "h/1", Ready: true, Roles: []string{"gateway", "consumer"}}
	applying := standby
	applying.Instance, applying.Applying = "h/2", true
	gateway := instanceDoc{Instance: "h/3", Ready: true, Roles: []string{"gateway"}}
	for _, tc := range []struct {
		docs []instanceDoc
		want bool
	}{
		{[]instanceDoc{standby}, true},
		{[]instanceDoc{standby, standby}, true},
		{[]instanceDoc{standby, applying}, false},
		{[]instanceDoc{gateway}, false},
	} {
		got := statusProblems(st, instancesView{Docs: tc.docs})
		has := slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, "no instance applies events") })
		if has != tc.want {
			t.Errorf("instances %+v: problems %q, want the nobody-applies line: %v", tc.docs, got, tc.want)
		}
	}
	// Only gateways answered: a problem when nothing pulls while events
	// wait or deliveries are outstanding (operations audit and review,
	// stop 41), not when a consumer that does not answer (NATS
	// permissions) keeps a pull waiting.
	for _, tc := range []struct {
		c    jetstream.ConsumerStatus
		want bool
	}{
		{jetstream.ConsumerStatus{Exists: true, NumPending: 3}, true},
		{jetstream.ConsumerStatus{Exists: true, NumPending: 3, NumWaiting: 1}, false},
		{jetstream.ConsumerStatus{Exists: true, NumPending: 3, NumAckPending: 8}, true}, // a stopped consumer's outstanding deliveries
		{jetstream.ConsumerStatus{Exists: true, NumAckPending: 1}, true},
		{jetstream.ConsumerStatus{Exists: true, NumAckPending: 8, NumWaiting: 1}, false},
		{jetstream.ConsumerStatus{Exists: true}, false},
	} {
		st.Consumers = []jetstream.ConsumerStatus{tc.c}
		got := statusProblems(st, instancesView{Docs: []instanceDoc{gateway}})
		has := slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, "no instance applies events") })
		if has != tc.want {
			t.Errorf("gateways only, consumer %+v: problems %q, want the nobody-applies line: %v", tc.c, got, tc.want)
		}
	}
}

// Events a serve found lost to WEBHOOKS' max_age (AUDIT's newest
// expired-unapplied record) are a problem for a week after, then only
// AUDIT has them.
func TestStatusProblemsLostToMaxAge(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	st := jetstream.Status{
		At:        at,
		Streams:   []jetstream.StreamStatus{{Name: "WEBHOOKS", Exists: true}, {Name: "GRANTS", Exists: true}, {Name: "DLQ", Exists: true}, {Name: "AUDIT", Exists: true}},
		Buckets:   []jetstream.BucketStatus{{Name: "WATERMARKS", Exists: true}, {Name: "APPLIED", Exists: true}},
		Consumers: []jetstream.ConsumerStatus{{Stream: "WEBHOOKS", Name: "hookgate-apply", Exists: true}},
		LastExpired: &event.AuditRecord{Time: at.Add(-6 * 24 * time.Hour), Decision: event.DecisionExpiredUnapplied,
			Reason: "WEBHOOKS seq 2-3 (2 events) left the stream at its max_age before they were applied"},
	}
	ready := instancesView{Docs: []instanceDoc{{Instance: "host/1/a", Ready: true}}}
	want := "events lost to WEBHOOKS' max_age, told 2026-11-28T03:00:00Z: WEBHOOKS seq 2-3 (2 events) left the stream at its max_age before they were applied (AUDIT expired-unapplied; shown for 7d)"
	if got := statusProblems(st, ready); !slices.Equal(got, []string{want}) {
		t.Errorf("six days after: problems %q, want [%q]", got, want)
	}
	st.LastExpired.Time = at.Add(-8 * 24 * time.Hour)
	if got := statusProblems(st, ready); len(got) != 0 {
		t.Errorf("eight days after: problems %q, want none", got)
	}
}

// The consumer lock's line says whether its holder answered: after a kill
// -9 of the holder it said "this instance applies events" of a process
// status no longer listed, for the rest of the lease (review BI).
func TestStatusLockLineSaysWhenItsHolderDidNotAnswer(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	st := jetstream.Status{At: at, ConsumerLock: &jetstream.LockStatus{Owner: "serve@vm/25134/abc", Until: at.Add(20 * time.Second)}}
	for _, tc := range []struct {
		inst instancesView
		want string
	}{
		{instancesView{Docs: []instanceDoc{{Instance: "vm/25134"}, {Instance: "vm/25135"}}}, "held by serve@vm/25134/abc (this instance applies events), renewed until 2026-12-04T03:00:20Z"},
		{instancesView{Docs: []instanceDoc{{Instance: "vm/25135"}, {Instance: "vm/2513"}}}, "held by serve@vm/25134/abc, which did not answer (stopped, or cut off from NATS?): it expires at 2026-12-04T03:00:20Z"},
		// None answered (permissions may deny the question): not told.
		{instancesView{None: "no hookgate serve answered within 2s"}, "held by serve@vm/25134/abc (this instance applies events)"},
	} {
		var out bytes.Buffer
		writeStatus(&out, st, viaListen, &config.Config{}, nil, tc.inst)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("instances %+v: the lock line lacks %q:\n%s", tc.inst, tc.want, out.String())
		}
	}
}

// A bucket's replica its leader reports offline is a problem line, as a
// stream's is (streams only before: a cluster audit, stop 41).
func TestStatusProblemsBucketReplicaOffline(t *testing.T) {
	st := jetstream.Status{
		At:      time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC),
		Buckets: []jetstream.BucketStatus{{Name: "WATERMARKS", Exists: true, Replicas: 3, ReplicasOffline: []string{"n2"}}, {Name: "APPLIED", Exists: true, Replicas: 3}},
	}
	got := statusProblems(st, instancesView{Docs: []instanceDoc{{Instance: "h/1", Ready: true, Roles: []string{"gateway", "consumer"}, Applying: true}}})
	want := "bucket WATERMARKS: replica n2 offline or silent for 10s or more (it runs on 2 of 3; NATS node down?)"
	if !slices.Equal(got, []string{want}) {
		t.Errorf("problems %q, want [%q]", got, want)
	}
}
