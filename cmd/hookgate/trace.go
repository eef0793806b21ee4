package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// runTrace prints everything known about one event:
// `hookgate trace KEY --config FILE [--json]`. Exit 1 when nothing is.
func runTrace(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	asJSON := fs.Bool("json", false, "print a JSON document")
	// KEY may come before or after the flags.
	var keys []string
	for {
		if err := parseFlags(fs, args, stdout); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		keys = append(keys, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(keys) != 1 {
		return usagef("trace: want one KEY, the key the gateway answered with: 'hookgate trace KEY --config FILE'")
	}
	key := keys[0]
	provider, _, err := jetstream.SplitKey(key)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := cliContext(ctx)
	defer cancel()
	sys, err := openForCLI(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), readOnly)
	if err != nil {
		return err
	}
	defer sys.Close()
	r, err := jetstream.Trace(ctx, sys.conn, jetstream.TraceQuery{
		Key: key, GrantsFilter: grantsFilter(cfg, provider), AppliedInGrants: appliedInGrants(cfg, sys.conn, provider),
	})
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(newTraceDoc(r)); err != nil {
			return err
		}
	} else if r.Found() {
		// For replayedUntil: the horizon replay judges by, the system's
		// where it is shorter than this config's.
		horizon, err := replayHorizon(ctx, sys, "trace", stderr)
		if err != nil {
			fmt.Fprintf(stderr, "hookgate: %v (until when a replay reports it already-applied is not said)\n", err)
		}
		writeTrace(stdout, r, cfg, horizon)
	}
	if !r.Found() {
		return fmt.Errorf("no event with key %s in WEBHOOKS, AUDIT, GRANTS or DLQ", key)
	}
	return nil
}

// grantsFilter narrows the GRANTS scan to the provider's subjects when its
// publish template puts the provider right after "grants."; otherwise (or
// for a provider no longer configured) all of GRANTS is read.
func grantsFilter(cfg *config.Config, provider string) string {
	pc, ok := cfg.Providers[provider]
	if !ok {
		return ""
	}
	if tmpl, on := pc.Effects.PublishTemplate(); on && strings.HasPrefix(tmpl, "grants.{provider}.") {
		return "grants." + provider + ".>"
	}
	return ""
}

// appliedInGrants reports whether the provider's rule remembers applied
// keys by its GRANTS messages (see consumer.Rule.AppliedInGrants).
func appliedInGrants(cfg *config.Config, conn *jetstream.Conn, provider string) bool {
	rules, err := consumerRules(cfg, jetstream.NewEffects(conn), nil)
	return err == nil && rules[provider].AppliedInGrants()
}

// traceDoc is `hookgate trace KEY --json`, a stable document (fields are
// added, never renamed or removed). It is printed even when nothing is
// found (found: false; the command still exits 1). Times are RFC 3339 UTC.
//
//	key, provider, account   account as written in the key (may be acct#<hex>)
//	found                    anything at all is known about the key
//	stored[]                 WEBHOOKS messages of the key (one, unless it was
//	                         stored again after the horizon)
//	  seq, subject, time     time: when WEBHOOKS stored it
//	  received_at            Hookgate-Received-At
//	  event_subject, type, occurred_at, account   the extracted raw values
//	audit[]                  AUDIT records of the key, oldest first
//	  audit_seq              sequence in AUDIT
//	  time, decision, actor, status, reason, seq, suppressed   the record
//	                         (seq: the WEBHOOKS sequence it is about)
//	grants[]                 GRANTS messages: seq, subject, time
//	dlq[]                    DLQ letters: seq, subject, time, reason,
//	                         deliveries, stored_seq, previous_seq
//	applied                  in (where the provider remembers applied keys:
//	                         APPLIED, or GRANTS for a watermark rule whose
//	                         published message is the record), bucket_exists
//	                         (APPLIED), remembered, since (when it was
//	                         remembered; forgotten after the horizon)
//	watermark                the stored event's subject in WATERMARKS, or null:
//	                         key, exists, at, keys (applied at exactly at),
//	                         key_at_mark, lease_owner, lease_key
//	scanned[]                what was read: stream, filter, exists,
//	                         up_to_seq (its last sequence when the trace
//	                         began), read (messages under filter)
type traceDoc struct {
	Key       string        `json:"key"`
	Provider  string        `json:"provider"`
	Account   string        `json:"account"`
	Found     bool          `json:"found"`
	Stored    []storedDoc   `json:"stored"`
	Audit     []auditDoc    `json:"audit"`
	Grants    []grantDoc    `json:"grants"`
	DLQ       []letterDoc   `json:"dlq"`
	Applied   appliedDoc    `json:"applied"`
	Watermark *watermarkDoc `json:"watermark"`
	Scanned   []scannedDoc  `json:"scanned"`
	// Consumer: where the consumer stands with an event nothing settled
	// yet (trace's "consumer" line); absent otherwise.
	Consumer string `json:"consumer,omitempty"`
}

type storedDoc struct {
	Seq          uint64     `json:"seq"`
	Subject      string     `json:"subject"`
	Time         time.Time  `json:"time"`
	ReceivedAt   *time.Time `json:"received_at,omitempty"`
	EventSubject string     `json:"event_subject"`
	Type         string     `json:"type"`
	OccurredAt   string     `json:"occurred_at"`
	Account      string     `json:"account"`
}

type auditDoc struct {
	AuditSeq   uint64    `json:"audit_seq"`
	Time       time.Time `json:"time"`
	Decision   string    `json:"decision"`
	Actor      string    `json:"actor"`
	Status     int       `json:"status"`
	Reason     string    `json:"reason"`
	Seq        uint64    `json:"seq"`
	Suppressed int       `json:"suppressed"`
}

type grantDoc struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Time    time.Time `json:"time"`
}

type letterDoc struct {
	Seq         uint64    `json:"seq"`
	Subject     string    `json:"subject"`
	Time        time.Time `json:"time"`
	Reason      string    `json:"reason"`
	Response    string    `json:"response,omitempty"`
	Deliveries  int       `json:"deliveries"`
	StoredSeq   uint64    `json:"stored_seq"`
	PreviousSeq uint64    `json:"previous_seq"`
}

type appliedDoc struct {
	In           string     `json:"in"`
	BucketExists bool       `json:"bucket_exists"`
	Remembered   bool       `json:"remembered"`
	Since        *time.Time `json:"since,omitempty"`
}

type watermarkDoc struct {
	Key        string     `json:"key"`
	Shard      bool       `json:"shard,omitempty"`
	Exists     bool       `json:"exists"`
	At         *time.Time `json:"at,omitempty"`
	Keys       []string   `json:"keys"`
	KeyAtMark  bool       `json:"key_at_mark"`
	LeaseOwner string     `json:"lease_owner,omitempty"`
	LeaseKey   string     `json:"lease_key,omitempty"`
}

type scannedDoc struct {
	Stream  string `json:"stream"`
	Filter  string `json:"filter"`
	Exists  bool   `json:"exists"`
	UpToSeq uint64 `json:"up_to_seq"`
	Read    uint64 `json:"read"`
}

func newTraceDoc(r jetstream.TraceReport) traceDoc {
	d := traceDoc{
		Key: r.Key, Provider: r.Provider, Account: r.Account, Found: r.Found(),
		Stored: []storedDoc{}, Audit: []auditDoc{}, Grants: []grantDoc{}, DLQ: []letterDoc{}, Scanned: []scannedDoc{},
		Applied:  appliedDoc{In: r.Applied.In, BucketExists: r.Applied.BucketExists, Remembered: r.Applied.Remembered, Since: timePtr(r.Applied.Since)},
		Consumer: consumerLine(r),
	}
	for _, s := range r.Stored {
		d.Stored = append(d.Stored, storedDoc{Seq: s.Seq, Subject: s.Subject, Time: s.Time, ReceivedAt: timePtr(s.ReceivedAt),
			EventSubject: s.EventSubject, Type: s.Type, OccurredAt: s.OccurredAt, Account: s.Account})
	}
	for _, a := range r.Audit {
		d.Audit = append(d.Audit, auditDoc{AuditSeq: a.AuditSeq, Time: a.Time, Decision: a.Decision, Actor: a.Actor,
			Status: a.Status, Reason: a.Reason, Seq: a.Seq, Suppressed: a.Suppressed})
	}
	for _, g := range r.Grants {
		d.Grants = append(d.Grants, grantDoc{Seq: g.Seq, Subject: g.Subject, Time: g.Time})
	}
	for _, l := range r.Letters {
		d.DLQ = append(d.DLQ, letterDoc{Seq: l.Seq, Subject: l.Subject, Time: l.Time, Reason: l.Reason, Response: l.Response,
			Deliveries: l.Deliveries, StoredSeq: l.StoredSeq, PreviousSeq: l.PreviousSeq})
	}
	if w := r.Watermark; w != nil {
		d.Watermark = &watermarkDoc{Key: w.Key, Shard: w.Shard, Exists: w.Exists, At: timePtr(w.At), Keys: w.Keys, KeyAtMark: w.KeyAtMark,
			LeaseOwner: w.LeaseOwner, LeaseKey: w.LeaseKey}
		if d.Watermark.Keys == nil {
			d.Watermark.Keys = []string{}
		}
	}
	for _, s := range r.Scans {
		d.Scanned = append(d.Scanned, scannedDoc{Stream: s.Stream, Filter: s.Filter, Exists: s.Exists, UpToSeq: s.UpToSeq, Read: s.Read})
	}
	return d
}

// traceLine is one row of the timeline.
type traceLine struct {
	at                time.Time
	source, seq, what string
	detail            string
}

// writeTrace prints the key, a timeline (oldest first, newest last), the
// watermark, and what was scanned. horizon is the one replay judges by
// (replayHorizon); 0: unknown, and until when a replay reports the event
// already-applied is not said.
func writeTrace(w io.Writer, r jetstream.TraceReport, cfg *config.Config, horizon time.Duration) {
	fmt.Fprintf(w, "key %s (provider %s, account %s)\n\n", r.Key, r.Provider, r.Account)
	var lines []traceLine
	for _, s := range r.Stored {
		detail := s.Subject
		var ex []string
		for _, f := range [][2]string{{"subject", s.EventSubject}, {"type", s.Type}, {"occurred", s.OccurredAt}} {
			if f[1] != "" {
				ex = append(ex, f[0]+" "+printable(f[1]))
			}
		}
		if len(ex) > 0 {
			detail += "; " + strings.Join(ex, ", ")
		}
		lines = append(lines, traceLine{s.Time, "WEBHOOKS", fmt.Sprint(s.Seq), "stored", detail})
	}
	for _, a := range r.Audit {
		parts := []string{a.Actor}
		if a.Status != 0 {
			parts = append(parts, fmt.Sprintf("HTTP %d", a.Status))
		}
		if a.Seq != 0 {
			parts = append(parts, fmt.Sprintf("WEBHOOKS seq %d", a.Seq))
		}
		if a.Reason != "" {
			parts = append(parts, a.Reason)
		}
		if a.Suppressed > 0 {
			parts = append(parts, fmt.Sprintf("%d like it suppressed", a.Suppressed))
		}
		lines = append(lines, traceLine{a.Time, "AUDIT", fmt.Sprint(a.AuditSeq), a.Decision, strings.Join(parts, ", ")})
	}
	for i, g := range r.Grants {
		detail := g.Subject
		if i == 0 && r.Applied.In == jetstream.StreamGrants {
			detail = joinReason(detail, replayedUntil(r, horizon))
		}
		lines = append(lines, traceLine{g.Time, "GRANTS", fmt.Sprint(g.Seq), "published", detail})
	}
	for _, l := range r.Letters {
		detail := fmt.Sprintf("%s; %d deliveries", l.Reason, l.Deliveries)
		if l.Response != "" {
			detail += fmt.Sprintf(", the receiver said %q", l.Response)
		}
		if l.StoredSeq != 0 {
			detail += fmt.Sprintf(", WEBHOOKS seq %d", l.StoredSeq)
		}
		if l.PreviousSeq != 0 {
			detail += fmt.Sprintf(", replaces DLQ seq %d", l.PreviousSeq)
		}
		lines = append(lines, traceLine{l.Time, "DLQ", fmt.Sprint(l.Seq), "dead letter", detail})
	}
	if r.Applied.Remembered && r.Applied.In == jetstream.BucketApplied {
		lines = append(lines, traceLine{r.Applied.Since, "APPLIED", "-", "remembered", replayedUntil(r, horizon)})
	}
	// Stable: at one instant, the order above (stored, audit, grants,
	// letters) is the order things happen.
	slices.SortStableFunc(lines, func(a, b traceLine) int { return a.at.Compare(b.at) })

	tw := newTable(w)
	fmt.Fprintln(tw, "TIME\tSTREAM\tSEQ\tWHAT\tDETAIL")
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", traceTime(l.at), l.source, l.seq, l.what, l.detail)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)

	if !r.Applied.Remembered {
		why := "not remembered"
		if r.Applied.In == jetstream.StreamGrants {
			why = "not in GRANTS (where this provider's applied keys are remembered)"
		} else if !r.Applied.BucketExists {
			why = "bucket missing (no consumer ran yet)"
		}
		fmt.Fprintf(tw, "applied\t%s\n", why)
	}
	// Under ordering none a subject's entry keeps no time, only the lease
	// its effects run under (an entry left with a time by an earlier
	// watermark ordering still shows it).
	unordered := cfg.Providers[r.Provider].Ordering == config.OrderingNone
	if wm := r.Watermark; wm != nil && (wm.Shard || unordered && wm.At.IsZero()) {
		// No subject, or no time: only the lease says anything about the key.
		s := wm.Key + ": free"
		switch {
		case !wm.Exists:
			s = wm.Key + ": none"
		case wm.LeaseKey == r.Key:
			s = wm.Key + ": leased to this key (its effects run, or its holder stopped before committing)"
		case wm.LeaseKey != "":
			s = wm.Key + ": leased to " + wm.LeaseKey
		}
		label := "key shard"
		if !wm.Shard {
			label = "subject lease"
			s += " (ordering none: no watermark time)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, s)
	} else if wm != nil {
		switch {
		case !wm.Exists:
			// Never written (nothing of the subject applied yet), or
			// removed by `watermarks prune` (its AUDIT record names it).
			fmt.Fprintf(tw, "watermark\t%s: none (no event of the subject applied, or pruned: see AUDIT watermark-pruned)\n", wm.Key)
		case wm.At.IsZero():
			// The entry holds a lease (or held one), no applied event: its
			// first event is being applied, was dead-lettered, or waits for
			// its retry.
			s := wm.Key + ": no event applied yet"
			if wm.LeaseKey != "" {
				s += ", leased to " + wm.LeaseKey
			}
			fmt.Fprintf(tw, "watermark\t%s\n", s)
		default:
			s := fmt.Sprintf("%s at %s", wm.Key, wm.At.Format(time.RFC3339Nano))
			switch {
			case wm.KeyAtMark:
				s += ", set by this key"
			case len(wm.Keys) > 0:
				s += ", set by " + strings.Join(wm.Keys, " ")
			}
			if wm.LeaseKey != "" {
				s += ", leased to " + wm.LeaseKey
			}
			fmt.Fprintf(tw, "watermark\t%s\n", s)
		}
	}
	if line := consumerLine(r); line != "" {
		fmt.Fprintf(tw, "consumer\t%s\n", line)
	}
	for i, s := range r.Scans {
		label := ""
		if i == 0 {
			label = "scanned"
		}
		switch {
		case !s.Exists:
			fmt.Fprintf(tw, "%s\t%s: missing\n", label, s.Stream)
		case s.UpToSeq == 0:
			fmt.Fprintf(tw, "%s\t%s %s: empty\n", label, s.Stream, s.Filter)
		default:
			fmt.Fprintf(tw, "%s\t%s %s up to seq %d: %d read\n", label, s.Stream, s.Filter, s.UpToSeq, s.Read)
		}
	}
	_ = tw.Flush()
}

// traceTime is how trace prints a time: UTC, to the millisecond, which
// `replay --until` takes in whole.
func traceTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// replayedUntil says until when a replay reports the key's event
// already-applied, as replay decides it: the horizon replay judges by,
// counted from its newest stored copy's horizonFrom (a key is stored
// again only once the horizon has passed, so an older copy's ran out
// before). Printed to the millisecond, rounded down: the last instant
// replay still says already-applied is less than a millisecond later.
// "" when the horizon is unknown. Counted from the GRANTS publish (or
// the APPLIED write) by the config's dedup.horizon, it once said a time
// 7 s after replay had begun to say beyond-horizon (a 20 s horizon).
func replayedUntil(r jetstream.TraceReport, horizon time.Duration) string {
	if horizon <= 0 {
		return ""
	}
	var newest *jetstream.StoredEvent
	for i := range r.Stored {
		if newest == nil || r.Stored[i].Seq > newest.Seq {
			newest = &r.Stored[i]
		}
	}
	if newest == nil {
		return "not in WEBHOOKS: no replay re-feeds it"
	}
	return "a replay reports it already-applied until " + traceTime(horizonFrom(newest.ReceivedAt, newest.Time).Add(horizon))
}

// consumerLine says where the consumer stands with the key's newest
// stored event when nothing settled it yet (not applied, stale or
// dead-lettered): not delivered yet (and how many stored events come
// before it), or delivered and not settled: its effects run, or it
// waits for a retry. "" when settled or unknown. trace said only "no
// event applied yet" of an event waiting for its retry (a 3 a.m. audit,
// stop 38).
func consumerLine(r jetstream.TraceReport) string {
	if (r.Consumer == nil && !r.NoConsumer) || len(r.Stored) == 0 || len(r.Grants) > 0 || len(r.Letters) > 0 {
		return ""
	}
	seq := r.Stored[len(r.Stored)-1].Seq
	for _, a := range r.Audit {
		if a.Seq == seq && (a.Decision == event.DecisionApplied || a.Decision == event.DecisionStale || a.Decision == event.DecisionDeadLettered) {
			return ""
		}
	}
	if r.NoConsumer {
		// A gateway-only deployment (roles.consumer: false) whose
		// consumer never started: trace said nothing of why (stop 39).
		return fmt.Sprintf("WEBHOOKS has no consumer %s: no serve with the consumer role (roles.consumer) has run on this store, so nothing applies stored events yet; start one, or 'hookgate replay' applies them", jetstream.DurableApply)
	}
	c := r.Consumer
	switch {
	case seq <= c.AckFloor.StreamSeq:
		return fmt.Sprintf("%s settled WEBHOOKS seq %d (its ack floor is at seq %d); no decision of it is in AUDIT yet", c.Name, seq, c.AckFloor.StreamSeq)
	case seq <= c.Delivered.StreamSeq:
		return fmt.Sprintf("%s delivered WEBHOOKS seq %d and has not settled it: its effects run, it waits for a retry after a failed one (the serve log's warnings name its key; status lists events delivered again), or the serve that took it stopped (it is delivered again after the ack wait)", c.Name, seq)
	default:
		return fmt.Sprintf("%s has not delivered WEBHOOKS seq %d yet: it has delivered up to seq %d (%d stored events wait before it at most)", c.Name, seq, c.Delivered.StreamSeq, seq-c.Delivered.StreamSeq-1)
	}
}
