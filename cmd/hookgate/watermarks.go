package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

const watermarksUsage = "want 'hookgate watermarks prune --config FILE [--older-than D] [--provider P] [--dry-run]'"

// runWatermarks is `hookgate watermarks prune`: WATERMARKS keeps one entry
// per subject for good (a mark aged out would let an older event of its
// subject apply), so a deployment with a new subject per booking grows it
// without end. prune removes the entries nothing can still be judged
// against, by the contract's own bound: a sender retries within
// dedup.horizon of an event, and a stored event is gone after
// retention.webhooks.max_age, so no event that may still come or be
// re-fed is older than a mark last written more than the two ago.
func runWatermarks(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		args = []string{"prune", "-help"}
	}
	if len(args) == 0 || args[0] != "prune" {
		return usagef("watermarks: %s", watermarksUsage)
	}
	fs := flag.NewFlagSet("watermarks prune", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	olderThan := fs.String("older-than", "", "prune marks last written longer ago than this (at least retention.webhooks.max_age + dedup.horizon, the default)")
	provider := fs.String("provider", "", "only this provider's marks")
	dryRun := fs.Bool("dry-run", false, "print what would be pruned, change nothing")
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("watermarks prune: unexpected %q; %s", fs.Arg(0), watermarksUsage)
	}
	if *provider != "" && !config.ValidProviderName(*provider) {
		return usagef("watermarks prune: --provider %q is not a provider name ([a-z0-9_-]+)", *provider)
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	age, err := pruneAge(cfg, *olderThan)
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
	kept, err := jetstream.ReadKeptLimits(ctx, sys.conn)
	if err != nil {
		return fmt.Errorf("watermarks prune: read how long WEBHOOKS keeps events: %w", err)
	}
	if age, err = serverPruneAge(cfg, kept, age, *olderThan != "", stderr); err != nil {
		return err
	}
	if !kept.MarksExist {
		fmt.Fprintln(stdout, "watermarks prune: no WATERMARKS bucket here yet (no serve with the consumer role has run): nothing to prune")
		return nil
	}
	lettered := map[string]bool{}
	if kept.DLQExists {
		if lettered, err = subjectsWithLetters(ctx, sys, *provider); err != nil {
			return fmt.Errorf("watermarks prune: %w", err)
		}
	}
	var audit *jetstream.AuditWriter
	stopAudit := func() {}
	if !*dryRun {
		audit, stopAudit = startAudit(sys, logger, 1024, nil)
	}
	err = pruneMarks(ctx, sys, audit, *provider, age, lettered, stdout, stderr)
	stopAudit() // flushes what is queued
	if audit != nil && audit.Failed() > 0 {
		// The record is the only trace of a removal that cannot be
		// undone (review AW): its loss is not a success.
		lost := fmt.Errorf("watermarks prune: %d watermark-pruned records were not written to AUDIT (the marks are pruned; the lines above list them)", audit.Failed())
		return errors.Join(err, lost)
	}
	return err
}

// pruneMarks prunes what runWatermarks selected and prints a line per
// mark and the summary; audit is nil on a dry run.
func pruneMarks(ctx context.Context, sys *system, audit *jetstream.AuditWriter, provider string, age time.Duration, lettered map[string]bool, stdout, stderr io.Writer) error {
	dryRun := audit == nil
	cutoff := time.Now().Add(-age)
	verb := "pruned"
	if dryRun {
		verb = "would prune"
	}
	var n pruneCounts
	read := 0
	err := jetstream.ReadMarks(ctx, sys.conn, provider, func(e jetstream.MarkEntry) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		read++
		switch {
		case isKeyShard(e.Key):
			// The leases of subject-less events: at most
			// consumer.KeyShards per provider, no mark to outgrow.
			return nil
		case e.Err != nil:
			n.unreadable++
			fmt.Fprintf(stderr, "hookgate: watermarks prune: %s left: %v\n", printable(e.Key), e.Err)
			return nil
		case e.Written.After(cutoff) || e.Mark.At.After(cutoff):
			n.newer++
			return nil
		case e.Mark.Lease != nil:
			// Held, or left by a holder that stopped: an event in
			// doubt the consumer settles against this entry.
			n.leased++
			return nil
		case lettered[e.Key]:
			// dlq replay re-feeds a letter of any age: against the
			// mark it is stale if superseded, without it it applies.
			n.lettered++
			return nil
		}
		if !dryRun {
			pruned, err := jetstream.PruneMark(ctx, sys.conn, e.Key, e.Rev)
			if err != nil {
				return err
			}
			if !pruned {
				n.changed++ // written since it was read: in use again
				return nil
			}
			audit.Record(pruneRecord(e, age))
		}
		n.pruned++
		fmt.Fprintf(stdout, "%s\t%s\tmark %s\twritten %s\n", verb, printable(e.Key), markTime(e), e.Written.UTC().Format(time.RFC3339))
		return nil
	})
	if _, ok := sys.cfg.Providers[provider]; err == nil && provider != "" && read == 0 && !ok {
		// A typo answered "would prune 0 marks", exit 0 (an operator tools
		// audit, stop 40); dlq refuses the same (review V). A provider
		// removed from the config but with marks left is still a filter.
		return fmt.Errorf("watermarks prune: --provider %q is not in the config and no mark in WATERMARKS has it", provider)
	}
	fmt.Fprintf(stdout, "%s\n", n.summary(verb, age, cutoff, dryRun))
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("watermarks prune: stopped after %d: %w (run it again: it goes on with what is left)", n.pruned, err)
		}
		return fmt.Errorf("watermarks prune: %w", err)
	}
	return nil
}

// pruneAge is --older-than, by default and at least the bound below which
// a mark may still decide an event: retention.webhooks.max_age plus
// dedup.horizon.
func pruneAge(cfg *config.Config, flagValue string) (time.Duration, error) {
	maxAge, horizon := cfg.Retention.Webhooks.MaxAge, cfg.Dedup.Horizon
	if maxAge <= 0 {
		return 0, errors.New("watermarks prune: retention.webhooks.max_age is 0 (events kept for good): a stored event of any age can be re-fed, and a mark pruned before it would let it apply after newer ones; prune needs a max_age")
	}
	least := maxAge + horizon
	if flagValue == "" {
		return least, nil
	}
	d, err := config.ParseDuration(flagValue)
	if err != nil || d <= 0 {
		return 0, usagef("watermarks prune: --older-than %q is not a duration (720h, 30d)", flagValue)
	}
	if d < least {
		return 0, fmt.Errorf("watermarks prune: --older-than %s is less than retention.webhooks.max_age (%s) plus dedup.horizon (%s), %s: an event still stored, or sent again within the horizon, could be older than a pruned mark and apply after newer ones",
			shortDuration(d), shortDuration(maxAge), shortDuration(horizon), shortDuration(least))
	}
	return d, nil
}

// serverPruneAge is age raised to the bound the running system keeps:
// the config given may be a copy edited for the next rollout (see
// readOnly), and a shorter max_age or horizon there than serve's would
// prune marks that events WEBHOOKS still holds are judged against.
// An --older-than (explicit) under the system's bound is refused.
func serverPruneAge(cfg *config.Config, kept jetstream.KeptLimits, age time.Duration, explicit bool, stderr io.Writer) (time.Duration, error) {
	if kept.WebhooksExists && kept.WebhooksMaxAge <= 0 {
		return 0, errors.New("watermarks prune: the running system's WEBHOOKS keeps events for good (serve's retention.webhooks.max_age is 0): a stored event of any age can be re-fed, and a mark pruned before it would let it apply after newer ones; prune needs a max_age in the config serve runs with")
	}
	maxAge := max(cfg.Retention.Webhooks.MaxAge, kept.WebhooksMaxAge)
	horizon := max(cfg.Dedup.Horizon, kept.AppliedTTL)
	least := maxAge + horizon
	if age >= least {
		return age, nil
	}
	if explicit {
		return 0, fmt.Errorf("watermarks prune: --older-than %s is less than WEBHOOKS' max_age (%s) plus the dedup horizon APPLIED keeps (%s), %s, as the running system has them (this config says %s and %s): an event still stored, or sent again within the horizon, could be older than a pruned mark and apply after newer ones",
			shortDuration(age), shortDuration(maxAge), shortDuration(horizon), shortDuration(least),
			shortDuration(cfg.Retention.Webhooks.MaxAge), shortDuration(cfg.Dedup.Horizon))
	}
	fmt.Fprintf(stderr, "hookgate: watermarks prune: the running system keeps events in WEBHOOKS for %s and applied keys for %s, longer than this config's retention.webhooks.max_age %s and dedup.horizon %s: pruning marks older than %s\n",
		shortDuration(maxAge), shortDuration(horizon), shortDuration(cfg.Retention.Webhooks.MaxAge), shortDuration(cfg.Dedup.Horizon), shortDuration(least))
	return least, nil
}

// subjectsWithLetters returns the WATERMARKS keys of the subjects that
// have a letter in DLQ (of provider only, when set).
func subjectsWithLetters(ctx context.Context, sys *system, provider string) (map[string]bool, error) {
	out := map[string]bool{}
	err := jetstream.Read(ctx, sys.conn, jetstream.StreamDLQ, letterRange(provider), func(m jetstream.StoredMsg, _ uint64) error {
		if ev := jetstream.EventFromMsg(m.Header, m.Body, m.Seq); ev.Subject != "" {
			out[consumer.MarkKey(ev)] = true
		}
		return nil
	})
	return out, err
}

// isKeyShard: <provider>.=K.<n>, a lease entry of subject-less events.
func isKeyShard(key string) bool {
	_, rest, _ := strings.Cut(key, ".")
	return strings.HasPrefix(rest, consumer.KeyShardToken+".")
}

func markTime(e jetstream.MarkEntry) string {
	switch {
	case e.Deleted:
		return "deleted"
	case e.Mark.At.IsZero():
		return "none"
	}
	return e.Mark.At.UTC().Format(time.RFC3339Nano)
}

// pruneRecord is the AUDIT record of one pruned mark.
func pruneRecord(e jetstream.MarkEntry, age time.Duration) event.AuditRecord {
	prov, rest, _ := strings.Cut(e.Key, ".")
	account, _, three := strings.Cut(rest, ".")
	if !three {
		// <provider>.<digest>: a key past event.MaxKey, whose account
		// is inside the digest.
		account = ""
	} else if a, ok := event.DecodeToken(account); ok {
		account = a
	}
	return event.AuditRecord{
		Time: time.Now().UTC(), Decision: event.DecisionWatermarkPruned, Provider: prov, Account: account,
		Reason: fmt.Sprintf("watermark %s (mark %s, last written %s) pruned: older than %s", e.Key, markTime(e), e.Written.UTC().Format(time.RFC3339), shortDuration(age)),
		Actor:  event.ActorOperator,
	}
}

type pruneCounts struct {
	pruned, newer, leased, lettered, changed, unreadable int
}

func (n pruneCounts) summary(verb string, age time.Duration, cutoff time.Time, dry bool) string {
	s := fmt.Sprintf("%s %d marks last written before %s (older than %s); kept %d newer, %d leased, %d with letters in DLQ",
		verb, n.pruned, cutoff.UTC().Format(time.RFC3339), shortDuration(age), n.newer, n.leased, n.lettered)
	if n.changed > 0 {
		s += fmt.Sprintf(", %d written again meanwhile", n.changed)
	}
	if n.unreadable > 0 {
		s += fmt.Sprintf(", %d unreadable", n.unreadable)
	}
	if dry {
		s += "; dry run, nothing changed"
	}
	return s
}
