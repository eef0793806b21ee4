package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	js "github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// This file answers `hookgate trace`: read-only, like inspect_status.go.

// Scanned says what a trace read of one stream covered.
type Scanned struct {
	Stream string
	Filter string
	Exists bool // false: the stream does not exist (yet); nothing read
	// UpToSeq is the stream's last sequence when the scan began: messages
	// stored later are not read, so a scan always ends.
	UpToSeq uint64
	// Read is how many messages under Filter were read (all of them up to
	// UpToSeq).
	Read uint64
}

// StoredEvent is a WEBHOOKS message of the traced key.
type StoredEvent struct {
	Seq        uint64
	Subject    string    // webhooks.<provider>.<account>
	Time       time.Time // when WEBHOOKS stored it
	ReceivedAt time.Time // Hookgate-Received-At (zero if absent)
	// EventSubject, Type and OccurredAt are the extracted raw values.
	EventSubject, Type, OccurredAt string
	Account                        string // raw account (Hookgate-Account)
}

// AuditEntry is one AUDIT record of the traced key.
type AuditEntry struct {
	AuditSeq uint64 // sequence in AUDIT
	event.AuditRecord
}

// GrantEntry is a GRANTS message of the traced key.
type GrantEntry struct {
	Seq     uint64
	Subject string
	Time    time.Time
}

// Letter is a DLQ letter of the traced key.
type Letter struct {
	Seq         uint64
	Subject     string
	Time        time.Time
	Reason      string
	Response    string // the forward receiver's refusal, excerpted ("" if none)
	Deliveries  int
	StoredSeq   uint64 // WEBHOOKS sequence of the event (0 if absent)
	PreviousSeq uint64 // the DLQ letter this one replaced (0 if none)
}

// AppliedState is what the applied-key memory knows about the key.
type AppliedState struct {
	// In is where the key's provider remembers applied keys: BucketApplied,
	// or StreamGrants for a rule whose GRANTS message is the record (see
	// TraceQuery.AppliedInGrants).
	In           string
	BucketExists bool // APPLIED exists
	Remembered   bool
	Since        time.Time // when it was remembered; expires after the horizon
}

// WatermarkState is the WATERMARKS entry of the event's subject or, for an
// event without one, the key shard whose lease its effects run under.
type WatermarkState struct {
	Key        string // provider.account.subject (tokens), or provider.=K.n
	Shard      bool   // Key is a key shard: only its lease means anything
	Exists     bool
	At         time.Time
	Keys       []string // keys applied at exactly At
	KeyAtMark  bool     // the traced key is one of Keys
	LeaseOwner string   // set while an event's effects run
	LeaseKey   string
}

// TraceReport is everything the streams and buckets know about one key.
type TraceReport struct {
	Key      string
	Provider string
	Account  string // as written in the key (may be acct#<hex>)
	Stored   []StoredEvent
	Audit    []AuditEntry
	Grants   []GrantEntry
	Letters  []Letter
	Applied  AppliedState
	// Watermark is nil when the key was never stored.
	Watermark *WatermarkState
	Scans     []Scanned // WEBHOOKS, AUDIT, GRANTS, DLQ
	// Consumer is where DurableApply stands in WEBHOOKS (nil: no such
	// consumer, or it did not answer): whether the stored event was
	// delivered, and whether everything up to it is settled.
	Consumer *ConsumerStatus
	// NoConsumer: WEBHOOKS has no DurableApply at all (the server said
	// so): no serve with the consumer role made it, nothing applies.
	NoConsumer bool
}

// Found reports whether anything at all is known about the key.
func (r TraceReport) Found() bool {
	return len(r.Stored) > 0 || len(r.Audit) > 0 || len(r.Grants) > 0 || len(r.Letters) > 0 || r.Applied.Remembered
}

// ErrBadKey: the string is not an idempotency key.
var ErrBadKey = errors.New("not a hookgate key")

// SplitKey returns the provider and the account (as written) of an
// idempotency key <provider>:<account>:<kind>:<id>. The account never
// holds ':' (an account that would is written acct#<sha256 hex>).
func SplitKey(key string) (provider, account string, err error) {
	parts := strings.SplitN(key, ":", 3)
	if len(parts) < 3 || parts[2] == "" {
		return "", "", fmt.Errorf("%w: %q, want <provider>:<account>:evt:<id> (the key the gateway answered with)", ErrBadKey, key)
	}
	provider, account = parts[0], parts[1]
	if provider == "" || strings.Trim(provider, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return "", "", fmt.Errorf("%w: %q: provider %q is not [a-z0-9_-]+", ErrBadKey, key, provider)
	}
	return provider, account, nil
}

// TraceQuery says what to trace.
type TraceQuery struct {
	Key string
	// GrantsFilter is the GRANTS subject filter to scan; "" scans
	// grants.>. Narrow it (grants.<provider>.>) when the provider's publish
	// template puts the provider there.
	GrantsFilter string
	// AppliedInGrants: the key's provider remembers applied keys by its
	// GRANTS message, not in APPLIED (consumer.Rule.AppliedInGrants).
	AppliedInGrants bool
}

// Trace collects everything known about q.Key: its WEBHOOKS messages,
// AUDIT records, GRANTS messages, DLQ letters, whether the applied-key
// memory (APPLIED or GRANTS) remembers it and its subject's watermark.
// Each stream is read with an ordered consumer under the narrowest subject
// filter the key allows (headers only except AUDIT, whose records are
// bodies), up to its last sequence at the time of the call. A missing
// stream or bucket is skipped and reported in Scans / Applied. Returns ErrBadKey for a malformed key, ErrUnavailable
// (wrapped) when JetStream does not answer.
func Trace(ctx context.Context, c *Conn, q TraceQuery) (TraceReport, error) {
	provider, account, err := SplitKey(q.Key)
	if err != nil {
		return TraceReport{}, err
	}
	r := TraceReport{Key: q.Key, Provider: provider, Account: account}
	grantsFilter := q.GrantsFilter
	if grantsFilter == "" {
		grantsFilter = "grants.>"
	}
	// The DLQ subject holds the raw account; a hashed one is unknown
	// here, so all the provider's letters are read.
	dlqFilter := LetterSubject(provider, account)
	if strings.HasPrefix(account, "acct#") {
		dlqFilter = "dlq." + provider + ".>"
	}
	matchHeader := func(m StoredMsg) bool {
		return m.Header.Get(event.HeaderKey) == q.Key || m.Header.Get("Nats-Msg-Id") == q.Key
	}
	keyJSON, err := json.Marshal(q.Key)
	if err != nil {
		return TraceReport{}, err
	}

	scans := make([]Scanned, 4)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		scans[0], err = scanStream(gctx, c, StreamWebhooks, event.WebhookSubject(provider, account), true, func(m StoredMsg) {
			if !matchHeader(m) {
				return
			}
			h := m.Header
			se := StoredEvent{
				Seq: m.Seq, Subject: m.Subject, Time: m.Time.UTC(),
				EventSubject: event.ExtractedValue(h, event.HeaderSubject), Type: event.ExtractedValue(h, event.HeaderType),
				OccurredAt: event.ExtractedValue(h, event.HeaderOccurredAt), Account: event.ExtractedValue(h, event.HeaderAccount),
			}
			if t, err := time.Parse(time.RFC3339Nano, h.Get(event.HeaderReceivedAt)); err == nil {
				se.ReceivedAt = t.UTC()
			}
			mu.Lock()
			r.Stored = append(r.Stored, se)
			mu.Unlock()
		})
		return err
	})
	g.Go(func() (err error) {
		scans[1], err = scanStream(gctx, c, StreamAudit, "audit.*."+event.Token(provider), false, func(m StoredMsg) {
			// The writer encodes strings as encoding/json does (held to it
			// by event's FuzzAuditRecordJSON), so a record of this key
			// holds this exact byte string.
			if !bytes.Contains(m.Body, keyJSON) {
				return
			}
			recs, _ := event.AuditRecords(m.Body)
			for _, rec := range recs {
				if rec.Key != q.Key {
					continue
				}
				rec.Time = rec.Time.UTC()
				mu.Lock()
				r.Audit = append(r.Audit, AuditEntry{AuditSeq: m.Seq, AuditRecord: rec})
				mu.Unlock()
			}
		})
		return err
	})
	g.Go(func() (err error) {
		scans[2], err = scanStream(gctx, c, StreamGrants, grantsFilter, true, func(m StoredMsg) {
			if !matchHeader(m) {
				return
			}
			mu.Lock()
			r.Grants = append(r.Grants, GrantEntry{Seq: m.Seq, Subject: m.Subject, Time: m.Time.UTC()})
			mu.Unlock()
		})
		return err
	})
	g.Go(func() (err error) {
		scans[3], err = scanStream(gctx, c, StreamDLQ, dlqFilter, true, func(m StoredMsg) {
			if m.Header.Get(event.HeaderKey) != q.Key {
				return
			}
			l := Letter{Seq: m.Seq, Subject: m.Subject, Time: m.Time.UTC(), Reason: m.Header.Get(event.HeaderDlqReason),
				Response: m.Header.Get(event.HeaderDlqResponse)}
			l.Deliveries, _ = strconv.Atoi(m.Header.Get(event.HeaderDlqDeliveries))
			l.StoredSeq, _ = strconv.ParseUint(m.Header.Get(event.HeaderStoredSeq), 10, 64)
			l.PreviousSeq, _ = strconv.ParseUint(m.Header.Get(event.HeaderDlqPreviousSeq), 10, 64)
			mu.Lock()
			r.Letters = append(r.Letters, l)
			mu.Unlock()
		})
		return err
	})
	g.Go(func() (err error) {
		r.Applied, err = appliedState(gctx, c, q.Key)
		return err
	})
	if err := g.Wait(); err != nil {
		return TraceReport{}, err
	}
	if err := r.readExpired(ctx, c); err != nil {
		return TraceReport{}, err
	}
	r.Scans = scans
	r.Applied.In = BucketApplied
	if q.AppliedInGrants {
		r.Applied.In, r.Applied.Remembered, r.Applied.Since = StreamGrants, len(r.Grants) > 0, time.Time{}
		if len(r.Grants) > 0 {
			r.Applied.Since = r.Grants[0].Time
		}
	}
	if err := r.readWatermark(ctx, c); err != nil {
		return TraceReport{}, err
	}
	if len(r.Stored) > 0 {
		// Best effort: the trace stands without it. Bounded: a request
		// sent as the consumer's leader was killed is never answered (a
		// cluster audit, stop 41: trace waited its 10 minutes).
		var info *js.ConsumerInfo
		err := rideOutLeader(ctx, "consumer "+DurableApply, traceConsumerWait, func(ctx context.Context) error {
			cons, err := c.JS.Consumer(ctx, StreamWebhooks, DurableApply)
			if err != nil {
				return classify("consumer "+DurableApply, err)
			}
			info = cons.CachedInfo()
			return nil
		})
		switch {
		case err == nil && info != nil:
			cs := consumerStatus(info)
			r.Consumer = &cs
		case errors.Is(err, js.ErrConsumerNotFound):
			r.NoConsumer = true
		}
	}
	return r, nil
}

// traceConsumerWait bounds trace's best-effort look at the consumer
// through an election.
const traceConsumerWait = 20 * time.Second

// readExpired adds to r.Audit the expired-unapplied records (a serve
// found the events gone at WEBHOOKS' max_age before they were applied)
// whose sequences hold one of the key's that WEBHOOKS no longer has:
// those records name no key, so the timeline would end at "accepted".
func (r *TraceReport) readExpired(ctx context.Context, c *Conn) error {
	var gone []uint64
	for _, a := range r.Audit {
		if a.Decision == event.DecisionAccepted && a.Seq > 0 && !slices.ContainsFunc(r.Stored, func(s StoredEvent) bool { return s.Seq == a.Seq }) {
			gone = append(gone, a.Seq)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	_, err := scanStream(ctx, c, StreamAudit, "audit."+event.DecisionExpiredUnapplied+".>", false, func(m StoredMsg) {
		recs, _ := event.AuditRecords(m.Body)
		for _, rec := range recs {
			first, last, ok := event.ExpiredRange(rec.Reason)
			if ok && slices.ContainsFunc(gone, func(seq uint64) bool { return first <= seq && seq <= last }) {
				rec.Time = rec.Time.UTC()
				r.Audit = append(r.Audit, AuditEntry{AuditSeq: m.Seq, AuditRecord: rec})
			}
		}
	})
	return err
}

func appliedState(ctx context.Context, c *Conn, key string) (AppliedState, error) {
	var a AppliedState
	kv, err := c.JS.KeyValue(ctx, BucketApplied)
	if errors.Is(err, js.ErrBucketNotFound) {
		return a, nil
	}
	if err != nil {
		return a, classify("bucket "+BucketApplied, err)
	}
	a.BucketExists = true
	e, err := kv.Get(ctx, appliedKVKey(key))
	if errors.Is(err, js.ErrKeyNotFound) {
		return a, nil
	}
	if err != nil {
		return a, classify("applied lookup", err)
	}
	a.Remembered, a.Since = true, e.Created().UTC()
	return a, nil
}

// readWatermark reads the watermark of the newest stored event's subject or,
// without a subject, the key shard it is leased under.
func (r *TraceReport) readWatermark(ctx context.Context, c *Conn) error {
	if len(r.Stored) == 0 {
		return nil
	}
	se := r.Stored[len(r.Stored)-1]
	mk := consumer.LeaseKey(consumer.Event{Provider: r.Provider, Account: se.Account, Subject: se.EventSubject, Key: r.Key})
	ws := &WatermarkState{Key: mk, Shard: se.EventSubject == ""}
	m, found, err := readMarkEntry(ctx, c, BucketMarks, mk)
	if err != nil {
		return err
	}
	if found {
		ws.Exists, ws.At, ws.Keys = true, m.At.UTC(), m.Keys
		ws.KeyAtMark = slices.Contains(m.Keys, r.Key)
		if m.Lease != nil {
			ws.LeaseOwner, ws.LeaseKey = m.Lease.Owner, m.Lease.Key
		}
	}
	r.Watermark = ws
	return nil
}

// scanStall is how long a scan waits for a message it knows is pending
// before it gives up (the server stopped answering): as long as Read's, since a
// stream leader's election on a cluster can outlast 10 s (a CI run's did,
// with trace run as a node was killed).
const scanStall = readStall

// scanStream reads the messages of stream under filter, oldest first, up
// to the stream's last sequence when it began, with a seqReader (headers
// only when headersOnly).
func scanStream(ctx context.Context, c *Conn, stream, filter string, headersOnly bool, fn func(StoredMsg)) (Scanned, error) {
	sc := Scanned{Stream: stream, Filter: filter}
	s, err := c.JS.Stream(ctx, stream)
	if errors.Is(err, js.ErrStreamNotFound) {
		return sc, nil
	}
	if err != nil {
		return sc, classify("stream "+stream, err)
	}
	sc.Exists = true
	state := s.CachedInfo().State
	sc.UpToSeq = state.LastSeq
	if state.Msgs == 0 {
		return sc, nil
	}
	// A safety net for the consumer: the reader deletes it when done, and
	// the server drops it by itself if this process dies first.
	rd := newSeqReader(c, stream, js.ConsumerConfig{
		DeliverPolicy: js.DeliverAllPolicy, FilterSubjects: []string{filter},
		HeadersOnly: headersOnly, InactiveThreshold: 30 * time.Second,
	}, scanStall)
	defer rd.close()
	for {
		msgs, done, err := rd.batch(ctx, readBatch)
		if err != nil {
			if ctx.Err() != nil {
				return sc, ctx.Err()
			}
			return sc, fmt.Errorf("scan %s (%s): read %d messages: %w", stream, filter, sc.Read, err)
		}
		if done {
			return sc, nil
		}
		for _, msg := range msgs {
			seq := msg.Meta.Sequence.Stream
			if seq > sc.UpToSeq {
				return sc, nil
			}
			sc.Read++
			fn(StoredMsg{Seq: seq, Subject: msg.Subject, Time: msg.Meta.Timestamp, Header: msg.Header, Body: msg.Data})
			if seq == sc.UpToSeq || msg.Meta.NumPending == 0 {
				return sc, nil
			}
		}
	}
}

// readMarkEntry reads key's Mark in bucket for the read-only commands,
// through nats.go's KeyValue rather than Watermarks' direct get: it also
// reads a bucket whose AllowDirect an operator turned off (serve turns it
// back on when it starts). found is false when the bucket or the entry is
// absent, deleted or purged.
func readMarkEntry(ctx context.Context, c *Conn, bucket, key string) (m consumer.Mark, found bool, err error) {
	// Each attempt bounded, the election ridden out: one request sent as
	// the bucket's leader was killed waited out trace's 10 minutes (a
	// cluster audit, stop 41).
	var value []byte
	err = rideOutLeader(ctx, "bucket "+bucket, readStall, func(ctx context.Context) error {
		kv, err := c.JS.KeyValue(ctx, bucket)
		if errors.Is(err, js.ErrBucketNotFound) {
			return nil
		}
		if err != nil {
			return classify("bucket "+bucket, err)
		}
		e, err := kv.Get(ctx, key)
		if errors.Is(err, js.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return classify(fmt.Sprintf("get %s %s", bucket, key), err)
		}
		value = e.Value()
		return nil
	})
	if err != nil || value == nil {
		return m, false, err
	}
	if err := json.Unmarshal(value, &m); err != nil {
		return m, false, fmt.Errorf("%s %s: corrupt entry: %w", bucket, key, err)
	}
	return m, true, nil
}
