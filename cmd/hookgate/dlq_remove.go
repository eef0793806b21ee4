package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// dlqRemove removes letters from DLQ without re-feeding them: the ones
// no re-feed can ever apply (an event without occurred_at under
// ordering: watermark, a test event, one the sender will never make
// valid). Each removal is audited (dlq-removed, actor operator), with
// the letter's reason; the stored event stays in WEBHOOKS, so `replay`
// can still re-feed it. Without it such letters stayed a status problem
// until DLQ's max_age, and a re-feed only appended them anew (a 3 a.m.
// audit, stop 38). A letter not found makes the exit 1.
func dlqRemove(ctx context.Context, sys *system, logger *slog.Logger, seqs []uint64, dryRun bool, stdout io.Writer) error {
	audit, stopAudit := startAudit(sys, logger, 1024, nil)
	defer stopAudit()
	tw := newTable(stdout)
	fmt.Fprintln(tw, "SEQ\tKEY\tRESULT\tREASON")
	removed, missing := 0, 0
	for _, seq := range seqs {
		if ctx.Err() != nil {
			break
		}
		m, err := jetstream.ReadMsg(ctx, sys.conn, jetstream.StreamDLQ, seq)
		if err != nil {
			missing++
			if errors.Is(err, jetstream.ErrNotFound) {
				fmt.Fprintf(tw, "%d\t-\tnot found\tno letter %d in DLQ (see 'hookgate dlq list')\n", seq, seq)
			} else {
				fmt.Fprintf(tw, "%d\t-\terror\t%v\n", seq, err)
			}
			continue
		}
		ev := letterEvent(m)
		why := m.Header.Get(event.HeaderDlqReason)
		if dryRun {
			removed++
			fmt.Fprintf(tw, "%d\t%s\twould remove\t%s\n", seq, printable(ev.Key), printable(truncateReason(why, 80)))
			continue
		}
		if err := jetstream.RemoveMsg(ctx, sys.conn, jetstream.StreamDLQ, seq); err != nil {
			missing++
			if errors.Is(err, jetstream.ErrNotFound) {
				fmt.Fprintf(tw, "%d\t%s\tnot found\talready removed (a replay beside this one?)\n", seq, printable(ev.Key))
			} else {
				fmt.Fprintf(tw, "%d\t%s\terror\t%v\n", seq, printable(ev.Key), err)
			}
			continue
		}
		removed++
		audit.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionDlqRemoved, Provider: ev.Provider, Account: ev.Account,
			Key: ev.Key, Seq: ev.Seq, Reason: fmt.Sprintf("DLQ %d: removed by an operator (dlq remove), not re-fed: %s", seq, why), Actor: event.ActorOperator})
		fmt.Fprintf(tw, "%d\t%s\tremoved\t%s\n", seq, printable(ev.Key), printable(truncateReason(why, 80)))
	}
	_ = tw.Flush()
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stdout, "stopped after %d of %d letters: %v\n", removed+missing, len(seqs), ctx.Err())
		return silentError{1}
	case dryRun:
		fmt.Fprintf(stdout, "dry run, nothing changed: %d letters would be removed\n", removed)
	default:
		fmt.Fprintf(stdout, "removed %d letters (their events stay in WEBHOOKS: 'hookgate replay' can still re-feed them)\n", removed)
	}
	if missing > 0 {
		return silentError{1}
	}
	return nil
}
