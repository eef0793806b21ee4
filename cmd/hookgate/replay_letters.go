package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

// storedLetters finds the DLQ letter of a stored event, reading each
// provider and account's letters once (DLQ is bounded and small next to
// WEBHOOKS).
type storedLetters struct {
	sys  *system
	read map[string]map[uint64][]uint64 // DLQ subject -> stored seq -> letter seqs, oldest first
	// upTo: DLQ's last sequence before each subject was read; live: the
	// replay's view of serve's consumer (nil: a dry run), which may write
	// letters of events above its floor meanwhile (see fresh).
	upTo map[string]uint64
	live *liveConsumer
}

// fresh forgets ev's DLQ subject as read when serve may have dead-lettered
// ev since (it is above the live consumer's floor) and DLQ has grown since
// the read, so the next look reads it again.
func (l *storedLetters) fresh(ctx context.Context, ev consumer.Event) error {
	if !l.live.mayHaveLettered(ev.Seq) {
		return nil
	}
	subj := jetstream.LetterSubject(ev.Provider, ev.Account)
	if _, ok := l.read[subj]; !ok {
		return nil
	}
	last, err := jetstream.LastSeq(ctx, l.sys.conn, jetstream.StreamDLQ)
	if err != nil {
		return err
	}
	if last > l.upTo[subj] {
		delete(l.read, subj)
	}
	return nil
}

// of returns the sequence in DLQ of ev's newest letter, 0 if none.
func (l *storedLetters) of(ctx context.Context, ev consumer.Event) (uint64, error) {
	all, err := l.all(ctx, ev)
	if err != nil || len(all) == 0 {
		return 0, err
	}
	return all[len(all)-1], nil
}

// all returns the sequences in DLQ of ev's letters, oldest first.
func (l *storedLetters) all(ctx context.Context, ev consumer.Event) ([]uint64, error) {
	subj := jetstream.LetterSubject(ev.Provider, ev.Account)
	if l.read == nil {
		l.read = map[string]map[uint64][]uint64{}
	}
	seqs, ok := l.read[subj]
	if !ok {
		seqs = map[uint64][]uint64{}
		if l.live != nil { // for fresh
			last, err := jetstream.LastSeq(ctx, l.sys.conn, jetstream.StreamDLQ)
			if err != nil {
				return nil, err
			}
			if l.upTo == nil {
				l.upTo = map[string]uint64{}
			}
			l.upTo[subj] = last
		}
		err := jetstream.Read(ctx, l.sys.conn, jetstream.StreamDLQ, jetstream.Range{Filter: subj}, func(m jetstream.StoredMsg, _ uint64) error {
			if stored, err := strconv.ParseUint(m.Header.Get(event.HeaderStoredSeq), 10, 64); err == nil {
				seqs[stored] = append(seqs[stored], m.Seq)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		l.read[subj] = seqs
	}
	return seqs[ev.Seq], nil
}

// supersede keeps one letter per stored event after replay dead-lettered
// ev again: when that wrote a new letter (DLQ's duplicate window had
// passed since the last), the letters ev had before (before) are removed,
// as `dlq replay` replaces a letter that fails again; otherwise the one it
// had stays. Review BH found a stored event with two identical letters
// after a replay, which `dlq replay --all` then re-fed twice. It says what
// it did, for the replay's line; removed letters are audited as
// dlq-removed.
func (l *storedLetters) supersede(ctx context.Context, audit *jetstream.AuditWriter, ev consumer.Event, before []uint64) string {
	subj := jetstream.LetterSubject(ev.Provider, ev.Account)
	delete(l.read, subj) // read DLQ again, for the letter just written
	now, err := l.all(ctx, ev)
	if err != nil {
		return "its letters in DLQ were not looked up: " + err.Error() + " (check 'hookgate dlq list' for two letters of it)"
	}
	newest := uint64(0)
	for _, seq := range now {
		if !slices.Contains(before, seq) {
			newest = max(newest, seq)
		}
	}
	if newest == 0 {
		if len(before) > 0 {
			return fmt.Sprintf("already in DLQ as letter %d", before[len(before)-1])
		}
		return ""
	}
	var removed []string
	for _, seq := range now {
		if seq == newest {
			continue
		}
		if err := l.remove(ctx, audit, ev, seq, fmt.Sprintf("replaced by letter %d (replay)", newest)); err != nil {
			return fmt.Sprintf("letter %d; its letter %d was not removed from DLQ: %v ('hookgate dlq show %d')", newest, seq, err, seq)
		}
		removed = append(removed, strconv.FormatUint(seq, 10))
	}
	l.read[subj][ev.Seq] = []uint64{newest}
	if len(removed) == 0 {
		return fmt.Sprintf("letter %d", newest)
	}
	return fmt.Sprintf("letter %d replaces letter %s in DLQ", newest, strings.Join(removed, ", "))
}

// remove deletes ev's letter seq from DLQ (one already gone is removed
// too) and audits it dlq-removed with why.
func (l *storedLetters) remove(ctx context.Context, audit *jetstream.AuditWriter, ev consumer.Event, seq uint64, why string) error {
	if err := jetstream.RemoveMsg(ctx, l.sys.conn, jetstream.StreamDLQ, seq); err != nil && !errors.Is(err, jetstream.ErrNotFound) {
		return err
	}
	audit.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionDlqRemoved, Provider: ev.Provider,
		Account: ev.Account, Key: ev.Key, Seq: ev.Seq, Reason: fmt.Sprintf("DLQ %d: %s", seq, why), Actor: event.ActorOperator})
	return nil
}

// resolve removes the letters of ev, which replay just applied: left in
// DLQ, a later `dlq replay` re-fed them, and once the applied key had
// expired the event applied, and forwarded, a second time (review V).
// It says what it did, for the replay's line; removed letters are
// audited as dlq-removed.
func (l *storedLetters) resolve(ctx context.Context, audit *jetstream.AuditWriter, ev consumer.Event) string {
	// A letter serve wrote since DLQ was read counts too (audit 42: one
	// written while the replay worked its way to the event stayed).
	err := l.fresh(ctx, ev)
	var seqs []uint64
	if err == nil {
		seqs, err = l.all(ctx, ev)
	}
	if err != nil {
		return "its letters in DLQ were not looked up: " + err.Error() + " (check 'hookgate dlq list' before re-feeding them)"
	}
	var done []string
	for _, seq := range seqs {
		if err := l.remove(ctx, audit, ev, seq, "applied by replay"); err != nil {
			return fmt.Sprintf("its letter %d was not removed from DLQ: %v (do not re-feed it: 'hookgate dlq show %d')", seq, err, seq)
		}
		done = append(done, strconv.FormatUint(seq, 10))
	}
	l.read[jetstream.LetterSubject(ev.Provider, ev.Account)][ev.Seq] = nil
	if len(done) == 0 {
		return ""
	}
	return "its letter " + strings.Join(done, ", ") + " removed from DLQ"
}
