package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

const dlqUsage = "want 'hookgate dlq list|show SEQ|replay (SEQ... | --all)|remove (SEQ... | --all) --config FILE [--provider P] [--reason TEXT] [--dry-run]'"

func runDLQ(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("dlq: %s", dlqUsage)
	}
	args = subcommandFirst(args)
	if isHelp(args[0]) {
		args = []string{"list", "-help"} // dlq's help, with its flags
	}
	sub := args[0]
	switch {
	case sub == "list" || sub == "show" || sub == "replay" || sub == "remove":
	case strings.HasPrefix(sub, "-"):
		// Flags only (`dlq --config FILE`, the subcommand forgotten): it
		// said the file was not a sequence number (audit 42).
		return usagef("dlq: no subcommand; %s", dlqUsage)
	default:
		return usagef("dlq: unknown subcommand %q; %s", sub, dlqUsage)
	}
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	provider := fs.String("provider", "", "list, replay --all, remove --all: only this provider's letters")
	reason := fs.String("reason", "", "list, replay --all, remove --all: only letters whose reason contains this")
	all := fs.Bool("all", false, "replay, remove: every letter (with --provider, --reason: every such letter)")
	dryRun := fs.Bool("dry-run", false, "replay, remove: print what would be done, change nothing")
	// Flags may come before or after the sequence numbers.
	var seqs []uint64
	rest := args[1:]
	for len(rest) > 0 {
		if err := parseFlags(fs, rest, stdout); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if sub == "list" {
			return usagef("dlq list takes no sequence numbers")
		}
		n, err := strconv.ParseUint(fs.Arg(0), 10, 64)
		if err != nil || n == 0 {
			return usagef("dlq %s: %q is not a DLQ sequence number", sub, fs.Arg(0))
		}
		if !slices.Contains(seqs, n) { // given twice, the second said "not found" (review A)
			seqs = append(seqs, n)
		}
		rest = fs.Args()[1:]
	}
	switch sub {
	case "list":
		if len(seqs) > 0 {
			return usagef("dlq list takes no sequence numbers")
		}
	case "show":
		if len(seqs) != 1 {
			return usagef("dlq show: want exactly one SEQ")
		}
	case "replay", "remove":
		if (len(seqs) == 0) == !*all {
			return usagef("dlq %s: give SEQ... or --all, not both or neither", sub)
		}
	}
	if (*all || *dryRun) && (sub == "list" || sub == "show") {
		// Ignored without a word before (an operations audit, stop 41):
		// a list run with --all looked like one of every letter.
		return usagef("dlq %s: --all and --dry-run are for 'dlq replay' and 'dlq remove'", sub)
	}
	if (*provider != "" || *reason != "") && !(sub == "list" || *all) {
		// Silently ignored, they would re-feed letters the operator
		// meant to leave alone.
		return usagef("dlq %s: --provider and --reason select letters for 'dlq list' and 'dlq replay|remove --all' only", sub)
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := cliContext(ctx)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys, err := openForCLI(ctx, cfg, logger, readOnly)
	if err != nil {
		return err
	}
	defer sys.Close()

	switch sub {
	case "list":
		return dlqList(ctx, sys, *provider, *reason, stdout)
	case "show":
		return dlqShow(ctx, sys, seqs[0], stdout)
	case "remove":
		if *all {
			if seqs, _, err = selectLetters(ctx, sys, "dlq remove", *provider, *reason); err != nil {
				return err
			}
		}
		return dlqRemove(ctx, sys, logger, seqs, *dryRun, stdout)
	}

	if !*dryRun {
		stop, err := announceApplying(ctx, sys, "dlq replay", stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	audit, stopAudit := startAudit(sys, logger, 1024, nil)
	defer stopAudit()

	rec := &letterRecorder{}
	o := cliProcessorOptions(cfg, sys)
	o.MaxDeliver = 1 // one synchronous attempt: a failure is re-appended at once
	o.LeaseWait = leaseWaitNote("dlq replay", func(s string) { fmt.Fprintln(stderr, s) })
	proc, err := buildProcessor(ctx, cfg, sys.conn, readOnly, logger, nil, nil, audit, o, func(d consumer.DeadLetters) consumer.DeadLetters {
		rec.next = d
		return rec
	})
	if err != nil {
		return err
	}
	// Each letter's event's WEBHOOKS sequence, to re-feed them in the
	// order the events were stored.
	stored := map[uint64]uint64{}
	if *all {
		if seqs, stored, err = selectLetters(ctx, sys, "dlq replay", *provider, *reason); err != nil {
			return err
		}
	} else {
		for _, seq := range seqs {
			// A letter not found is reported in the loop below.
			if m, err := jetstream.ReadMsg(ctx, sys.conn, jetstream.StreamDLQ, seq); err == nil {
				stored[seq] = storedSeqOf(m.Header.Get)
			}
		}
	}
	refeedOrder(seqs, stored)
	var dry *consumer.DryRun
	if *dryRun {
		// Each letter judged after those the re-feed would apply before it.
		dry = proc.NewDryRun()
	}
	var count [3]int            // by refeedResult
	decided := map[string]int{} // resolved letters by decision
	tw := newTable(stdout)
	fmt.Fprintln(tw, "SEQ\tKEY\tRESULT\tREASON")
	tried := 0
	for _, seq := range seqs {
		if ctx.Err() != nil {
			// Interrupted (or out of time): the letters left were not
			// tried; re-feeding them with a dead context printed each as
			// an error (review V, as review 9 found for replay).
			break
		}
		line, res, decision := dlqReplayOne(ctx, sys, proc, rec, audit, seq, dry)
		count[res]++
		if res == resolved {
			decided[decision]++
		}
		tried++
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	if err := ctx.Err(); err != nil {
		left := seqs[tried:]
		fmt.Fprintf(stdout, "stopped after %d of %d letters\n", tried, len(seqs))
		what := "none left"
		if len(left) > 0 {
			what = fmt.Sprintf("%d letters not re-fed, untouched in DLQ (first %d)", len(left), left[0])
		}
		fmt.Fprintf(stderr, "hookgate: dlq replay stopped (%v): %s; run it again to go on\n", err, what)
		return silentError{1}
	}
	notFed := ""
	if n := count[notRefed]; n > 0 {
		notFed = fmt.Sprintf(", %d not re-fed", n)
	}
	if *dryRun {
		again := ""
		if n := count[failedAgain]; n > 0 {
			again = fmt.Sprintf(", %d would be dead-lettered again", n)
		}
		// The letters it would re-feed, as the real run's "re-fed N"
		// counts them: a letter not found counted as one (audit 42).
		fmt.Fprintf(stdout, "dry run, nothing changed: %d letters%s%s%s\n", count[resolved]+count[failedAgain], decisionsOf(decided), again, notFed)
	} else {
		// Resolved is not applied: a stale letter is resolved by being
		// dropped, and a run that dropped them must not read as a clean
		// re-feed (a 3 a.m. audit, stop 38).
		fmt.Fprintf(stdout, "re-fed %d letters: %d resolved%s, %d failed again%s\n", count[resolved]+count[failedAgain], count[resolved], decisionsOf(decided), count[failedAgain], notFed)
	}
	if count[failedAgain]+count[notRefed] > 0 {
		return silentError{1}
	}
	return nil
}

// subcommandFirst moves dlq's subcommand to the front when flags come
// before it (`dlq --config FILE list`, as typed from shell history): the
// flag parser took it for a sequence number, and the error named the file
// (review V). Without a subcommand among the arguments they stay as they
// are, for the usage error.
func subcommandFirst(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "list" || a == "show" || a == "replay" || a == "remove":
			if i == 0 {
				return args
			}
			out := append([]string{a}, args[:i]...)
			return append(out, args[i+1:]...)
		case !strings.HasPrefix(a, "-"):
			return args // a sequence number or an unknown word: not ours to move
		case !strings.Contains(a, "=") && dlqValueFlag(a):
			i++ // its value follows
		}
	}
	return args
}

// dlqValueFlag: a dlq flag that takes a value (-config FILE).
func dlqValueFlag(a string) bool {
	switch strings.TrimLeft(a, "-") {
	case "config", "provider", "reason":
		return true
	}
	return false
}

// refeedResult is what became of one letter in dlq replay.
type refeedResult int

const (
	resolved    refeedResult = iota // applied, stale or already applied: removed (or would be, in a dry run)
	failedAgain                     // dead-lettered again (a new letter)
	notRefed                        // not found, or not decided (the store did not answer): nothing changed
)

// letterRecorder passes dead letters on and remembers the last sequence,
// so a re-fed letter that fails again can be reported old -> new.
type letterRecorder struct {
	next consumer.DeadLetters
	seq  uint64
}

func (r *letterRecorder) DeadLetter(ctx context.Context, ev consumer.Event, reason string, deliveries int) (uint64, error) {
	seq, err := r.next.DeadLetter(ctx, ev, reason, deliveries)
	r.seq = seq
	return seq, err
}

// letterEvent rebuilds the event a letter holds, without the letter's own
// headers.
func letterEvent(m jetstream.StoredMsg) consumer.Event {
	h := m.Header
	ev := jetstream.EventFromMsg(h, m.Body, storedSeqOf(h.Get))
	hdr := ev.Header.Clone()
	hdr.Del(event.HeaderDlqReason)
	hdr.Del(event.HeaderDlqDeliveries)
	hdr.Del(event.HeaderDlqResponse)
	hdr.Del(event.HeaderStoredSeq)
	hdr.Set(event.HeaderDlqPreviousSeq, strconv.FormatUint(m.Seq, 10))
	ev.Header = hdr
	return ev
}

// dlqReplayOne re-feeds one letter and says what became of it.
// dry is not nil in a dry run.
func dlqReplayOne(ctx context.Context, sys *system, proc *consumer.Processor, rec *letterRecorder, audit *jetstream.AuditWriter, seq uint64, dry *consumer.DryRun) (line string, res refeedResult, decision string) {
	m, err := jetstream.ReadMsg(ctx, sys.conn, jetstream.StreamDLQ, seq)
	if err != nil {
		if errors.Is(err, jetstream.ErrNotFound) {
			return fmt.Sprintf("%d\t-\tnot found\tno letter %d in DLQ (see 'hookgate dlq list')", seq, seq), notRefed, ""
		}
		return fmt.Sprintf("%d\t-\terror\t%v", seq, err), notRefed, ""
	}
	ev := letterEvent(m)
	if _, ok := sys.cfg.Providers[ev.Provider]; !ok {
		// Re-fed, it was dead-lettered again for want of a rule: a new
		// letter for the same event, the old one removed.
		return fmt.Sprintf("%d\t%s\tnot re-fed\tprovider %s is not in this config: letter left in DLQ (renamed? add %s back beside the new name to re-feed it; see the README's \"Renaming or removing a provider\")", seq, ev.Key, ev.Provider, ev.Provider), notRefed, ""
	}
	if dry != nil {
		j, err := dry.Judge(ctx, ev, 0)
		if err != nil {
			return fmt.Sprintf("%d\t%s\terror\t%v", seq, ev.Key, err), notRefed, ""
		}
		d, res := j.Decision, resolved
		switch d {
		case consumer.Applied:
			d = "apply"
		case consumer.DeadLettered:
			res = failedAgain // counted, and exit 1, as the re-feed would (review A)
		}
		return fmt.Sprintf("%d\t%s\t%s\t%s", seq, ev.Key, d, j.Reason), res, d
	}
	rec.seq = 0
	out := proc.ProcessOnce(ctx, ev, 1)
	rec1 := func(decision, reason string) {
		// seq is the WEBHOOKS sequence in every record; the letter's own
		// goes in the reason.
		audit.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: decision, Provider: ev.Provider, Account: ev.Account,
			Key: ev.Key, Seq: ev.Seq, Reason: fmt.Sprintf("DLQ %d: %s", seq, reason), Actor: event.ActorOperator})
	}
	switch out.Decision {
	case consumer.Retry:
		// Not decided (KV or NATS trouble, or the interrupt cut its
		// effects short): the letter stays as it is.
		if ctx.Err() != nil {
			fwd := sys.cfg.Providers[ev.Provider].Effects.Forward.URL != ""
			return fmt.Sprintf("%d\t%s\t%s\t%s (letter kept)", seq, ev.Key, decInterrupted, joinReason(interruptedReason(ctx, fwd), out.Reason)), notRefed, ""
		}
		return fmt.Sprintf("%d\t%s\tfailed\t%s (letter kept)", seq, ev.Key, out.Reason), notRefed, ""
	case consumer.DeadLettered:
		rec1(event.DecisionDlqRefed, "failed again: "+out.Reason)
		if err := jetstream.RemoveMsg(ctx, sys.conn, jetstream.StreamDLQ, seq); errors.Is(err, jetstream.ErrNotFound) {
			// Removed meanwhile (a replay that re-fed the same event).
			return fmt.Sprintf("%d -> %d\t%s\tfailed again\t%s (the old letter was already removed)", seq, rec.seq, ev.Key, out.Reason), failedAgain, ""
		} else if err != nil {
			return fmt.Sprintf("%d -> %d\t%s\tfailed again\t%s (old letter not removed: %v)", seq, rec.seq, ev.Key, out.Reason, err), failedAgain, ""
		}
		rec1(event.DecisionDlqRemoved, fmt.Sprintf("re-appended as %d", rec.seq))
		return fmt.Sprintf("%d -> %d\t%s\tfailed again\t%s", seq, rec.seq, ev.Key, out.Reason), failedAgain, ""
	}
	rec1(event.DecisionDlqRefed, out.Decision)
	if err := jetstream.RemoveMsg(ctx, sys.conn, jetstream.StreamDLQ, seq); errors.Is(err, jetstream.ErrNotFound) {
		// Removed meanwhile: a `replay` that applied the same event
		// removes its letters (review BH: said "jetstream unavailable").
		return fmt.Sprintf("%d\t%s\t%s (its letter was already removed)\t%s", seq, ev.Key, out.Decision, out.Reason), resolved, out.Decision
	} else if err != nil {
		// Decided, but the letter stays: exit 1 so a script looks.
		return fmt.Sprintf("%d\t%s\t%s\tbut the letter was not removed: %v", seq, ev.Key, out.Decision, err), notRefed, ""
	}
	rec1(event.DecisionDlqRemoved, out.Decision)
	return fmt.Sprintf("%d\t%s\t%s (removed)\t%s", seq, ev.Key, out.Decision, out.Reason), resolved, out.Decision
}

// selectLetters reads DLQ for the letters of provider (all when empty)
// whose reason contains reason, with each one's event's WEBHOOKS
// sequence.
func selectLetters(ctx context.Context, sys *system, cmd, provider, reason string) ([]uint64, map[uint64]uint64, error) {
	var seqs []uint64
	stored := map[uint64]uint64{}
	read := 0
	err := jetstream.Read(ctx, sys.conn, jetstream.StreamDLQ, letterRange(provider), func(m jetstream.StoredMsg, _ uint64) error {
		read++
		if reason == "" || strings.Contains(m.Header.Get(event.HeaderDlqReason), reason) {
			seqs = append(seqs, m.Seq)
			stored[m.Seq] = storedSeqOf(m.Header.Get)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", cmd, err)
	}
	if err := unknownLetterProvider(cmd, sys, provider, read); err != nil {
		return nil, nil, err
	}
	return seqs, stored, nil
}

// storedSeqOf is a letter's event's WEBHOOKS sequence, read by header
// (its headers' Get), 0 when the letter does not say.
func storedSeqOf(header func(string) string) uint64 {
	n, _ := strconv.ParseUint(header(event.HeaderStoredSeq), 10, 64)
	return n
}

// refeedOrder sorts letters (DLQ sequences) into the order their events
// were stored, letters that do not say last, each group in DLQ order. DLQ
// order is not a subject's: a letter re-fed and failed again is appended
// anew, and retries' jitter dead-letters a subject's events out of turn,
// so re-fed in DLQ order an older event came after a newer one of its
// subject and was dropped as stale without ever being applied (a 3 a.m.
// audit, stop 38). Stored order is the order the live consumer would
// have applied them in.
func refeedOrder(seqs []uint64, stored map[uint64]uint64) {
	key := func(seq uint64) uint64 {
		if n := stored[seq]; n > 0 {
			return n
		}
		return math.MaxUint64
	}
	slices.SortStableFunc(seqs, func(a, b uint64) int {
		if c := cmp.Compare(key(a), key(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// decisionsOf is " (3 applied, 1 stale)" for resolved letters by
// decision, "" for none.
func decisionsOf(decided map[string]int) string {
	if len(decided) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(decided))
	parts := make([]string, len(names))
	for i, d := range names {
		parts[i] = fmt.Sprintf("%d %s", decided[d], d)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// letterRange selects the letters of one provider, or all.
func letterRange(provider string) jetstream.Range {
	if provider == "" {
		return jetstream.Range{}
	}
	return jetstream.Range{Filter: "dlq." + provider + ".>"}
}

func dlqList(ctx context.Context, sys *system, provider, reason string, stdout io.Writer) error {
	r := letterRange(provider)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "SEQ\tKEY\tPROVIDER\tREASON\tDELIVERIES\tTIME")
	n, read := 0, 0
	err := jetstream.Read(ctx, sys.conn, jetstream.StreamDLQ, r, func(m jetstream.StoredMsg, _ uint64) error {
		read++
		why := m.Header.Get(event.HeaderDlqReason)
		if reason != "" && !strings.Contains(why, reason) {
			return nil
		}
		n++
		// Stored values, some from outside (a receiver's answer in the
		// reason): printed so a terminal shows them, not obeys them.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.Seq, printable(m.Header.Get(event.HeaderKey)), printable(m.Header.Get(event.HeaderProvider)),
			printable(truncateReason(why, 80)), printable(m.Header.Get(event.HeaderDlqDeliveries)), m.Time.UTC().Format(time.RFC3339))
		return nil
	})
	if err != nil {
		return fmt.Errorf("dlq list: %w", err)
	}
	if err := unknownLetterProvider("dlq list", sys, provider, read); err != nil {
		return err
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "%d letters\n", n)
	return nil
}

// unknownLetterProvider refuses a --provider that is neither in the config
// nor found on any letter (read: the letters its filter selected): a typo
// answered "0 letters", exit 0, while letters waited (review V). A provider
// removed from the config but with letters left is still a filter.
func unknownLetterProvider(cmd string, sys *system, provider string, read int) error {
	if provider == "" || read > 0 {
		return nil
	}
	if _, ok := sys.cfg.Providers[provider]; ok {
		return nil
	}
	return fmt.Errorf("%s: --provider %q is not in the config and no letter in DLQ has it", cmd, provider)
}

func truncateReason(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncate(s, n-3) // with "...", on a character boundary (review AQ)
}

func dlqShow(ctx context.Context, sys *system, seq uint64, stdout io.Writer) error {
	m, err := jetstream.ReadMsg(ctx, sys.conn, jetstream.StreamDLQ, seq)
	if errors.Is(err, jetstream.ErrNotFound) {
		return fmt.Errorf("dlq show: no letter %d in DLQ (see 'hookgate dlq list')", seq)
	}
	if err != nil {
		return fmt.Errorf("dlq show: %w", err)
	}
	fmt.Fprintf(stdout, "seq: %d\nsubject: %s\ntime: %s\n\n", m.Seq, m.Subject, m.Time.UTC().Format(time.RFC3339Nano))
	names := make([]string, 0, len(m.Header))
	for k := range m.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range m.Header[k] {
			fmt.Fprintf(stdout, "%s: %s\n", k, printable(v))
		}
	}
	fmt.Fprintf(stdout, "\n%s\n", m.Body)
	return nil
}
