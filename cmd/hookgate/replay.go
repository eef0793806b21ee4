package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// Replay decisions printed per event (CONTRACT.md, replay).
const (
	decApply       = "apply"
	decApplied     = "applied"
	decRedelivered = "redelivered"
	decFailed      = "failed"
	// decNotInConfig: the event's provider is not in the config replay
	// was given. Judged by the consumer's rule for that (no rule:
	// dead-lettered), a config copied from another instance wrote a letter
	// and a dead-lettered record for every stored event of the provider,
	// applied ones included, and exited 0 (review A).
	decNotInConfig = "not-in-config"
	// decInterrupted: the event was cut short by an interrupt (Ctrl-C)
	// or the command's time before it was decided; its subject's lease
	// was given back.
	decInterrupted   = "interrupted"
	decSkippedReason = "skipped: beyond the horizon (use --force)"
	// forcedReason goes with an event --force applies from beyond the
	// horizon.
	forcedReason = "forced beyond the horizon: if it was applied before, this repeats it"
	// noForwardReason goes with an already-applied event that --redeliver
	// has nothing to run again for, in the dry run as in the real run.
	noForwardReason = "no forward effect configured to redeliver"
)

func runReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	since := fs.String("since", "", "RFC 3339 time or duration back from now (2h)")
	until := fs.String("until", "", "RFC 3339 time or duration back from now")
	fromSeq := fs.Uint64("from-seq", 0, "first WEBHOOKS sequence")
	toSeq := fs.Uint64("to-seq", 0, "last WEBHOOKS sequence")
	provider := fs.String("provider", "", "only this provider")
	subject := fs.String("subject", "", "only events with this subject (the raw value)")
	dryRun := fs.Bool("dry-run", false, "print decisions, change nothing")
	redeliver := fs.Bool("redeliver", false, "re-run forward for already-applied events")
	force := fs.Bool("force", false, "also events stored longer ago than the horizon")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("replay: unexpected argument %q", fs.Arg(0))
	}
	now := time.Now()
	r := jetstream.Range{FromSeq: *fromSeq, ToSeq: *toSeq}
	var err error
	if r.Since, err = parseWhen(*since, now); err != nil {
		return usagef("replay: --since: %v", err)
	}
	if r.Until, err = parseWhen(*until, now); err != nil {
		return usagef("replay: --until: %v", err)
	}
	// --until is inclusive at the precision it is given in: a time
	// copied from `dlq list` or `status` (whole seconds, review V) or
	// from `trace` (milliseconds) left out the very event it was copied
	// from, stored later in that second or millisecond.
	r.Until = r.Until.Add(untilSpan(*until))
	if !r.Since.IsZero() && !r.Until.IsZero() && r.Until.Before(r.Since) {
		// Most likely swapped: durations count back from now, so --until
		// takes the shorter one.
		return usagef("replay: --until %s is before --since %s (durations count back from now: --since 2h --until 1h)",
			r.Until.UTC().Format(time.RFC3339Nano), r.Since.UTC().Format(time.RFC3339Nano))
	}
	toSet := false
	fs.Visit(func(f *flag.Flag) { toSet = toSet || f.Name == "to-seq" })
	if toSet && *toSeq == 0 {
		// Taken for "no bound" before (audit 42): --from-seq 5 --to-seq 0
		// replayed from 5 to the end, where --to-seq 2 was refused.
		return usagef("replay: --to-seq 0: WEBHOOKS sequences start at 1 (leave --to-seq out for no upper bound)")
	}
	if *toSeq > 0 && *fromSeq > *toSeq {
		return usagef("replay: --from-seq %d is after --to-seq %d", *fromSeq, *toSeq)
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	if *provider != "" {
		if _, ok := cfg.Providers[*provider]; !ok {
			return fmt.Errorf("replay: --provider %q is not in the config", *provider)
		}
		r.Filter = "webhooks." + *provider + ".>"
	}

	// No overall deadline (other operator commands have 10 minutes): a
	// replay decides some hundred events a second, and one over a day of
	// traffic stopped at 10 minutes, its advice to run it again starting
	// over from --since (review A). Each store call has its own timeout;
	// Ctrl-C stops it, saying where to go on from.
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys, err := openForCLI(ctx, cfg, logger, readOnly)
	if err != nil {
		return err
	}
	defer sys.Close()
	if !*dryRun {
		stop, err := announceApplying(ctx, sys, "replay", stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	audit, stopAudit := startAudit(sys, logger, 1024, nil)
	defer stopAudit()

	progress := newProgress(stderr, stdout)
	o := cliProcessorOptions(cfg, sys)
	o.LeaseWait = leaseWaitNote("replay", progress.note)
	var live *liveConsumer
	var letterer func(consumer.DeadLetters) consumer.DeadLetters
	if !*dryRun {
		live = newLiveConsumer(ctx, sys)
		letterer = func(d consumer.DeadLetters) consumer.DeadLetters { return replayLetters{d, live} }
	}
	proc, err := buildProcessor(ctx, cfg, sys.conn, readOnly, logger, nil, nil, audit, o, letterer)
	if err != nil {
		return err
	}
	horizon, err := replayHorizon(ctx, sys, "replay", stderr)
	if err != nil {
		return err
	}
	forwards := map[string]consumer.Effect{}
	for name, pc := range cfg.Providers {
		if pc.Effects.Forward.URL != "" {
			f, err := consumer.NewForward(consumer.ForwardOptions{URL: pc.Effects.Forward.URL, Timeout: pc.Effects.Forward.Timeout, Secrets: pc.Effects.Forward.SigningSecrets()})
			if err != nil {
				return err
			}
			forwards[name] = f
		}
	}

	counts := map[string]int{}
	rows := newReplayRows(stdout, progress.clear)
	letters := &storedLetters{sys: sys, live: live}
	ro := &rideOut{}
	if *dryRun {
		// Each event judged after those the run would apply before it.
		ro.dry = proc.NewDryRun()
	}
	missing := map[string]bool{} // providers of stored events that the config lacks
	var undecided uint64         // the first stored event not decided yet, once one was read
	err = jetstream.Read(ctx, sys.conn, jetstream.StreamWebhooks, r, func(m jetstream.StoredMsg, total uint64) error {
		if undecided == 0 {
			undecided = m.Seq
			// The last sequence the read may reach: SEQ need not widen
			// as the replay goes on (m.Seq + total did, under --provider,
			// whose sequences are sparse).
			rows.fitSeq(m.Last)
		}
		if err := ctx.Err(); err != nil {
			// Interrupted (or out of time): the events left were not
			// tried; re-feeding them with a dead context reported each
			// as failed (review 9).
			return err
		}
		ev := jetstream.EventFromMsg(m.Header, m.Body, m.Seq)
		ev.ReceivedAt = horizonFrom(ev.ReceivedAt, m.Time)
		if *subject != "" && ev.Subject != *subject {
			// Counted too: total is every event read, and a bar counting
			// only the subject's ended at 100/3900, looking stalled.
			progress.step(total)
			undecided = m.Seq + 1 // passed over: an interrupt goes on after it
			return nil
		}
		if _, ok := cfg.Providers[ev.Provider]; !ok {
			counts[decNotInConfig]++
			missing[ev.Provider] = true
			rows.row(m.Seq, ev.Key, decNotInConfig, "provider "+ev.Provider+" is not in this config: left alone")
			progress.step(total)
			undecided = m.Seq + 1
			return nil
		}
		decision, reason := replayOne(ctx, proc, ro, forwards, audit, letters, horizon, ev, *dryRun, *redeliver, *force)
		if decision == decFailed && ctx.Err() != nil {
			// Cut short by the interrupt, not refused: said "failed",
			// though a forward in flight may have reached its receiver.
			_, hasForward := forwards[ev.Provider]
			decision, reason = decInterrupted, joinReason(interruptedReason(ctx, hasForward), reason)
		}
		counts[decision]++
		rows.row(m.Seq, ev.Key, decision, reason)
		progress.step(total)
		if ctx.Err() == nil { // else the interrupt may have cut it short: go on from it
			undecided = m.Seq + 1
		}
		return nil
	})
	progress.done()
	rows.end()
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintln(stdout, summary(counts, *dryRun))
		goOn := "run it again to go on"
		if undecided > 0 {
			goOn = fmt.Sprintf("run it again with --from-seq %d (and the same filters) to go on", undecided)
		}
		fmt.Fprintf(stderr, "hookgate: replay stopped (%v): the events after those listed were not replayed; %s (applied ones are found already applied)\n", ctx.Err(), goOn)
		return silentError{1}
	}
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	fmt.Fprintln(stdout, summary(counts, *dryRun))
	failed := counts[decFailed] > 0
	if n := counts[decFailed]; n > 0 {
		// Exit 1 said nothing on stderr for these (audit 42), where every
		// other outcome that makes it says why.
		fmt.Fprintf(stderr, "hookgate: replay: %d events failed and were not applied (their lines say why; nothing was changed for them, and none was dead-lettered): once the cause is fixed, run the replay again\n", n)
	}
	if n := counts[decNotInConfig]; n > 0 {
		fmt.Fprintf(stderr, "hookgate: replay: %d events of providers not in the config were left alone (%s): replay them with a config that has them\n",
			n, strings.Join(slices.Sorted(maps.Keys(missing)), ", "))
		failed = true
	}
	if n := counts[consumer.DeadLettered]; n > 0 && !*dryRun {
		// Not applied: a script running the replay after an outage must
		// hear of it, as 'dlq replay' exits 1 for a letter that failed
		// again (before, exit 0 with the count in the summary only).
		fmt.Fprintf(stderr, "hookgate: replay: %d events were dead-lettered, not applied: 'hookgate dlq list' says why; once the cause is fixed, 'hookgate dlq replay' re-feeds them\n", n)
		failed = true
	}
	if failed {
		return silentError{1}
	}
	return nil
}

// interruptedReason says why an event ctx cut short was not decided and
// what that means; forwards: its provider has a forward, which may have
// reached its receiver (a Ctrl-C before any effect, or for a provider
// without one, said so too: found by review).
func interruptedReason(ctx context.Context, forwards bool) string {
	why := "stopped by the interrupt before it was decided"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "stopped at the command's time limit before it was decided"
	}
	if !forwards {
		return why + "; a rerun decides it"
	}
	return why + ": a forward under way may have reached its receiver; a rerun sends it again with the same Idempotency-Key, unless a newer event of its subject applies first (then it is stale)"
}

// replayOne decides (dry run) or re-feeds one event. Re-feeding goes
// through the same rules as the consumer, so an applied event stays
// applied once: it is reported already-applied.
func replayOne(ctx context.Context, proc *consumer.Processor, ro *rideOut, forwards map[string]consumer.Effect, audit *jetstream.AuditWriter, letters *storedLetters, horizon time.Duration, ev consumer.Event, dryRun, redeliver, force bool) (string, string) {
	judged := horizon
	if force {
		judged = 0
	}
	j, err := ro.judge(ctx, proc, ev, judged)
	if err != nil {
		return decFailed, err.Error()
	}
	if j.Decision == consumer.BeyondHorizon {
		// Audited as the other decisions are (it was not: audit 42), so
		// trace shows the operator's replay looked at the event.
		if !dryRun {
			recordReplayed(audit, ev, consumer.BeyondHorizon)
		}
		return consumer.BeyondHorizon, joinReason(j.Reason, "--force replays it anyway")
	}
	if j.Decision == consumer.DeadLettered {
		// It can never apply (no subject, no parseable time): a letter
		// for this stored event already in DLQ is the one to act on.
		// Re-feeding wrote another each time, once DLQ's duplicate
		// window had passed (review 9).
		seq, err := letters.of(ctx, ev)
		if err != nil {
			return decFailed, "look for its letter in DLQ: " + err.Error()
		}
		if seq != 0 {
			if !dryRun {
				recordReplayed(audit, ev, consumer.DeadLettered)
			}
			return consumer.DeadLettered, joinReason(j.Reason, fmt.Sprintf("already in DLQ as letter %d, not dead-lettered again ('hookgate dlq show %d')", seq, seq))
		}
	}
	// Nothing remembers keys beyond the horizon: an event applied before
	// looks new, and applying it again runs its effects a second time.
	forced := force && j.Decision == consumer.Applied && !ev.ReceivedAt.IsZero() && time.Since(ev.ReceivedAt) > horizon
	if forced {
		j.Reason = joinReason(j.Reason, forcedReason)
	}
	if dryRun {
		d := j.Decision
		if d == consumer.Applied {
			d = decApply
			if seq, err := letters.of(ctx, ev); err == nil && seq != 0 {
				j.Reason = joinReason(j.Reason, fmt.Sprintf("its letter %d would be removed from DLQ", seq))
			}
		}
		if d == consumer.AlreadyApplied && redeliver {
			if _, ok := forwards[ev.Provider]; !ok {
				// What the real run says (its line had an empty reason).
				return d, noForwardReason
			}
			d = "redeliver"
		}
		return d, j.Reason
	}
	if j.Decision == consumer.AlreadyApplied && redeliver {
		f, ok := forwards[ev.Provider]
		if !ok {
			return consumer.AlreadyApplied, noForwardReason
		}
		// Under the subject's lease, as the consumer's effects run: never
		// beside serve's forward of another event of the subject.
		if err := proc.Redeliver(ctx, ev, f); err != nil {
			return decFailed, "redeliver: " + err.Error()
		}
		audit.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionRedelivered, Provider: ev.Provider,
			Account: ev.Account, Key: ev.Key, Seq: ev.Seq, Actor: event.ActorOperator})
		return decRedelivered, ""
	}
	// Its letters before the re-feed: one that fails again writes a new
	// letter (once DLQ's duplicate window has passed), which replaces them.
	before, lerr := letters.all(ctx, ev)
	before = slices.Clone(before)
	out := proc.ProcessOnce(ctx, ev, 1)
	decision := out.Decision
	if decision == consumer.DeadLettered && lerr == nil {
		out.Reason = joinReason(out.Reason, letters.supersede(ctx, audit, ev, before))
	}
	if decision == consumer.Retry {
		decision = decFailed
	}
	if forced && decision == consumer.Applied {
		out.Reason = joinReason(out.Reason, forcedReason)
	}
	if decision == consumer.Applied {
		out.Reason = joinReason(out.Reason, letters.resolve(ctx, audit, ev))
	}
	recordReplayed(audit, ev, decision)
	return decision, out.Reason
}

// recordReplayed audits the replay's decision on ev (AUDIT's replayed
// record, the decision as its reason).
func recordReplayed(audit *jetstream.AuditWriter, ev consumer.Event, decision string) {
	audit.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionReplayed, Provider: ev.Provider,
		Account: ev.Account, Key: ev.Key, Seq: ev.Seq, Reason: decision, Actor: event.ActorOperator})
}

// replayHorizon is the horizon replay judges by: this config's
// dedup.horizon, or how long the running system remembers applied keys
// where that is shorter (jetstream.KeptFor; said on stderr, naming cmd).
// trace says by it until when a replay reports an event already-applied.
func replayHorizon(ctx context.Context, sys *system, cmd string, stderr io.Writer) (time.Duration, error) {
	horizon := sys.cfg.Dedup.Horizon
	kept, err := jetstream.KeptFor(ctx, sys.conn)
	if err != nil {
		return 0, fmt.Errorf("%s: read how long applied keys are kept: %w", cmd, err)
	}
	if kept > 0 && kept < horizon {
		fmt.Fprintf(stderr, "hookgate: %s: the system remembers applied keys for %s, less than this config's dedup.horizon %s: events stored longer ago than %s are beyond the horizon\n",
			cmd, kept, horizon, kept)
		horizon = kept
	}
	return horizon, nil
}

// horizonFrom is the instant a replay counts an event's age from, for
// the horizon: its Hookgate-Received-At, or, without one, when WEBHOOKS
// stored it. An event is beyond-horizon once more than the horizon has
// passed since (consumer.Judge).
func horizonFrom(receivedAt, stored time.Time) time.Time {
	if receivedAt.IsZero() {
		return stored
	}
	return receivedAt
}

// rideOut lets a replay wait out a failover (a cluster's leader election:
// seconds) while the stores do not answer, where such events were
// reported failed (review K), without waiting that long for every event
// of a store that stays down: once one event waited judgeRideOut in vain,
// the next ones get one try each until the stores answer again.
type rideOut struct {
	// down: the stores did not answer for judgeRideOut; each event then
	// gets one try until they answer again.
	down bool
	// dry, in a dry run, judges each event after the ones before it.
	dry *consumer.DryRun
}

// judgeRideOut bounds how long a replay waits for the stores to answer
// again.
const judgeRideOut = 30 * time.Second

// judge is proc.Judge, tried again while the stores do not answer, for up
// to judgeRideOut per event (one try while they are known down).
func (r *rideOut) judge(ctx context.Context, proc *consumer.Processor, ev consumer.Event, horizon time.Duration) (consumer.Outcome, error) {
	// Each event gets the whole wait: the time since the last judgement
	// (the previous event's effects, the read riding out a failover) is not
	// the stores' silence (review D3).
	start := time.Now()
	wait := 250 * time.Millisecond
	judge := proc.Judge
	if r.dry != nil {
		judge = r.dry.Judge
	}
	for {
		j, err := judge(ctx, ev, horizon)
		if err == nil {
			r.down = false
			return j, nil
		}
		if !errors.Is(err, jetstream.ErrUnavailable) || r.down {
			return j, err
		}
		if time.Since(start)+wait > judgeRideOut {
			r.down = true
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func summary(counts map[string]int, dryRun bool) string {
	names := make([]string, 0, len(counts))
	total := 0
	for k, n := range counts {
		names = append(names, k)
		total += n
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	verb := "replayed"
	if dryRun {
		verb = "dry run, nothing changed:"
	}
	if total == 0 {
		return verb + " 0 events"
	}
	return fmt.Sprintf("%s %d events: %s", verb, total, strings.Join(parts, ", "))
}

// parseWhen reads RFC 3339 or a duration back from now ("2h", "3d").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := parseRFC3339(s); err == nil {
		return t, nil
	}
	d, err := config.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration like 2h", s)
	}
	return now.Add(-d), nil
}

// parseRFC3339 reads an RFC 3339 time, whose "T" and "Z" may be lower case
// (RFC 3339 section 5.6; Go's parser takes them upper case only): no other
// letter is in one, so upper-casing it changes nothing else.
func parseRFC3339(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, strings.ToUpper(s))
}

// untilSpan is how much later than the instant it names an --until of s
// still covers: the rest of its last digit's unit, so 03:23:59Z takes in
// up to 03:23:59.999999999 and 03:23:59.883Z up to 03:23:59.883999999.
// 0 for a time to the nanosecond and for a duration (an instant).
func untilSpan(s string) time.Duration {
	if _, err := parseRFC3339(s); err != nil {
		return 0
	}
	// RFC 3339's seconds end at byte 19 (2006-01-02T15:04:05); the
	// fraction, if any, follows (Go's parser takes a comma too).
	digits := 0
	if len(s) > 19 && (s[19] == '.' || s[19] == ',') {
		for _, c := range s[20:] {
			if c < '0' || c > '9' {
				break
			}
			digits++
		}
	}
	unit := time.Second
	for range min(digits, 9) {
		unit /= 10
	}
	return unit - time.Nanosecond
}

// joinReason appends more to a reason that may be empty.
func joinReason(reason, more string) string {
	switch {
	case reason == "":
		return more
	case more == "":
		return reason
	}
	return reason + "; " + more
}
