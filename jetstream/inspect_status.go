package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	js "github.com/nats-io/nats.go/jetstream"
)

// This file answers the operator's read-only questions (hookgate status,
// hookgate trace). Nothing here creates or changes a stream, bucket or
// durable consumer: a stream or bucket that does not exist yet is reported
// as missing, not created.

// StreamStatus is one stream's state and limits.
type StreamStatus struct {
	Name   string
	Exists bool // false: not created yet; every other field is zero
	// Messages and Bytes are what the stream holds now.
	Messages, Bytes   uint64
	FirstSeq, LastSeq uint64
	// FirstTime and LastTime are zero when the stream is empty.
	FirstTime, LastTime time.Time
	// MaxAge 0 and MaxBytes -1 mean no limit.
	MaxAge   time.Duration
	MaxBytes int64
	// Duplicates is the stream's duplicate window.
	Duplicates time.Duration
	// Metadata is the stream's metadata (WEBHOOKS: KeyIndexMetadata).
	Metadata map[string]string
	// Replicas is the stream's replica count; ReplicasOffline names the
	// replicas its leader reports offline, or not current and not heard
	// from for replicaSilentAfter (a node down: the stream runs on the
	// others, one loss closer to no quorum). nats-server 2.15 keeps a
	// killed node's replica "offline: false"; it turns not current about
	// 10 s after its last contact.
	Replicas        int
	ReplicasOffline []string
}

// replicaSilentAfter is how long a replica that is not current may go
// unheard before status calls it offline: a replica catching up is not
// current but heard from.
const replicaSilentAfter = 10 * time.Second

// DiskUse is Bytes as a percentage of MaxBytes; ok is false without a
// byte limit.
func (s StreamStatus) DiskUse() (pct float64, ok bool) {
	if s.MaxBytes <= 0 {
		return 0, false
	}
	return float64(s.Bytes) * 100 / float64(s.MaxBytes), true
}

// BucketStatus is one KV bucket.
type BucketStatus struct {
	Name   string
	Exists bool
	Values uint64 // entries (history is 1: one per key)
	// KeyShards (WATERMARKS): entries that are the leases of events without
	// a subject (<provider>.=K.<n>), not a subject's watermark.
	KeyShards uint64
	Bytes     uint64
	TTL       time.Duration // 0: entries never expire
	Metadata  map[string]string
	// Replicas and ReplicasOffline as StreamStatus's, of the bucket's
	// stream (they named streams only: a cluster audit, stop 41).
	Replicas        int
	ReplicasOffline []string
}

// Position is how far a consumer got.
type Position struct {
	ConsumerSeq uint64
	StreamSeq   uint64
	Last        time.Time // zero: never
}

// ConsumerStatus is one durable consumer's lag.
type ConsumerStatus struct {
	Stream, Name string
	Exists       bool
	// NumPending: stored, not yet delivered. NumAckPending: delivered, not
	// yet acknowledged. NumRedelivered: delivered more than once and still
	// unacknowledged.
	NumPending     uint64
	NumAckPending  int
	NumRedelivered int
	NumWaiting     int // pull requests waiting
	Delivered      Position
	AckFloor       Position
	// OldestUnapplied is when the gateway stored the oldest event this
	// consumer has not acknowledged (the one after its ack floor); zero
	// when it has none, or for other consumers than DurableApply.
	// WEBHOOKS deletes it at its max_age, applied or not.
	OldestUnapplied time.Time
}

// DedupStatus is the size of WEBHOOKS' duplicate store: the keys of the
// messages stored within the dedup horizon, which JetStream holds in
// memory and refuses as duplicates. The server does not report the size of
// that store itself, so it is counted from the stream: WEBHOOKS refuses
// deletes, so its sequences have no gaps and the count is LastSeq -
// FirstSeq + 1.
type DedupStatus struct {
	Horizon time.Duration
	Since   time.Time // now - Horizon
	// Known is false when the server cannot find a message by time (older
	// than nats-server 2.11); FirstSeq and StoreSize are then zero.
	Known bool
	// FirstSeq is the first WEBHOOKS sequence stored at or after Since; 0
	// when there is none.
	FirstSeq  uint64
	StoreSize uint64
	// Window is WEBHOOKS' duplicate window as the server has it: the
	// horizon, or dedup.window where an embedded gateway's key index
	// holds the horizon's keys (KeyIndex).
	Window time.Duration
	// KeyIndex says who refuses a key stored within the horizon:
	// KeyIndexNone (the server's window), KeyIndexKeeps (the embedded
	// gateway's key index; the window is dedup.window) or
	// KeyIndexPending (an upgrade began: the window still spans the
	// horizon until an embedded gateway's index has read the keys back).
	KeyIndex string
}

// The values of DedupStatus.KeyIndex.
const (
	KeyIndexNone    = "none"
	KeyIndexKeeps   = "kept"
	KeyIndexPending = "pending"
)

// Status is what hookgate status shows.
type Status struct {
	At      time.Time
	Streams []StreamStatus // WEBHOOKS, GRANTS, DLQ, AUDIT
	Buckets []BucketStatus // WATERMARKS, APPLIED
	// Consumers: DurableApply on WEBHOOKS first (Exists false when not
	// created yet), then the other durable consumers of WEBHOOKS and
	// GRANTS (downstream services), by stream and name.
	Consumers []ConsumerStatus
	// ConsumersUnlisted says why the other durable consumers of a stream
	// are not (all) listed: its consumer list did not answer in time ("":
	// all listed). DurableApply is read on its own, so it is there.
	ConsumersUnlisted string
	// DLQByProvider counts DLQ letters per provider.
	DLQByProvider map[string]uint64
	Dedup         DedupStatus
	// ConsumerLock is who applies events on a cluster (ConsumerLock);
	// nil where no instance ever took the lock (the embedded server).
	ConsumerLock *LockStatus
	// LastExpired is AUDIT's newest expired-unapplied record: the last
	// events a consuming serve found gone at WEBHOOKS' max_age before they
	// were applied. nil when AUDIT has none.
	LastExpired *event.AuditRecord
}

// LockStatus is the consumer lock's entry: Owner is empty when released.
type LockStatus struct {
	Owner string
	Until time.Time
}

// Stream returns the named stream's status (Exists false if not listed).
func (s Status) Stream(name string) StreamStatus {
	for _, st := range s.Streams {
		if st.Name == name {
			return st
		}
	}
	return StreamStatus{Name: name}
}

// Bucket returns the named bucket's status (Exists false if not listed).
func (s Status) Bucket(name string) BucketStatus {
	for _, b := range s.Buckets {
		if b.Name == name {
			return b
		}
	}
	return BucketStatus{Name: name}
}

// StatusOptions parameterise ReadStatus.
type StatusOptions struct {
	// Horizon is dedup.horizon, the age below which a stored key is a
	// duplicate.
	Horizon time.Duration
	// Now is the time the horizon is counted back from; zero: time.Now().
	Now time.Time
}

// ReadStreams reads what the four streams hold against their limits (a
// missing one has Exists false): the cheap part of ReadStatus, for
// metrics.
func ReadStreams(ctx context.Context, c *Conn) ([]StreamStatus, error) {
	var out []StreamStatus
	for _, name := range []string{StreamWebhooks, StreamGrants, StreamDLQ, StreamAudit} {
		ss, err := streamStatus(ctx, c, name)
		if err != nil {
			return nil, err
		}
		out = append(out, ss)
	}
	return out, nil
}

// ReadStatus reads the streams, buckets and consumers. Missing ones are
// reported with Exists false; errors are ErrUnavailable (wrapped) when
// JetStream does not answer.
//
// A request sent while a stream has no leader (a node just died) may never
// be answered; each attempt is bounded by statusAttemptWait, and the read
// is tried statusAttempts times, so an operator gets the status after the
// election, or an error within about a minute, whatever ctx allows.
func ReadStatus(ctx context.Context, c *Conn, o StatusOptions) (Status, error) {
	var (
		st  Status
		err error
	)
	for range statusAttempts {
		actx, cancel := context.WithTimeout(ctx, statusAttemptWait)
		st, err = readStatus(actx, c, o)
		cancel()
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			break
		}
	}
	return st, err
}

// statusAttempts and statusAttemptWait bound ReadStatus (see there): a
// JetStream leader election takes seconds.
var (
	statusAttempts    = 3
	statusAttemptWait = 20 * time.Second
)

func readStatus(ctx context.Context, c *Conn, o StatusOptions) (Status, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	st := Status{At: now.UTC(), DLQByProvider: map[string]uint64{}}
	for _, name := range []string{StreamWebhooks, StreamGrants, StreamDLQ, StreamAudit} {
		ss, err := streamStatus(ctx, c, name)
		if err != nil {
			return Status{}, err
		}
		st.Streams = append(st.Streams, ss)
	}
	for _, name := range []string{BucketMarks, BucketApplied} {
		bs, err := bucketStatus(ctx, c, name)
		if err != nil {
			return Status{}, err
		}
		st.Buckets = append(st.Buckets, bs)
	}
	cs, unlisted, err := consumerStatuses(ctx, c)
	if err != nil {
		return Status{}, err
	}
	st.ConsumersUnlisted = unlisted
	if cs[0].Exists {
		s, err := c.JS.Stream(ctx, StreamWebhooks)
		if err != nil {
			return Status{}, classify("stream "+StreamWebhooks, err)
		}
		if cs[0].OldestUnapplied, err = oldestUnapplied(ctx, s, cs[0]); err != nil {
			return Status{}, err
		}
	}
	st.Consumers = cs
	if st.Stream(StreamDLQ).Exists {
		if st.DLQByProvider, err = dlqByProvider(ctx, c); err != nil {
			return Status{}, err
		}
	}
	st.Dedup, err = dedupStatus(ctx, c, st.Stream(StreamWebhooks), o.Horizon, now)
	if err != nil {
		return Status{}, err
	}
	if st.ConsumerLock, err = consumerLockStatus(ctx, c); err != nil {
		return Status{}, err
	}
	if st.Stream(StreamAudit).Exists {
		if st.LastExpired, err = lastExpired(ctx, c); err != nil {
			return Status{}, err
		}
	}
	return st, nil
}

// lastExpired reads AUDIT's newest expired-unapplied record.
func lastExpired(ctx context.Context, c *Conn) (*event.AuditRecord, error) {
	s, err := c.JS.Stream(ctx, StreamAudit)
	if err != nil {
		return nil, classify("stream "+StreamAudit, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "audit."+event.DecisionExpiredUnapplied+".>")
	if errors.Is(err, js.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("last "+event.DecisionExpiredUnapplied+" record in "+StreamAudit, err)
	}
	rs, err := event.AuditRecords(m.Data)
	if err != nil || len(rs) == 0 {
		return nil, fmt.Errorf("AUDIT seq %d: unreadable %s record: %v", m.Sequence, event.DecisionExpiredUnapplied, err)
	}
	return &rs[len(rs)-1], nil
}

func consumerLockStatus(ctx context.Context, c *Conn) (*LockStatus, error) {
	m, found, err := readMarkEntry(ctx, c, BucketLocks, consumerLockKey)
	if err != nil || !found {
		return nil, err
	}
	ls := &LockStatus{}
	if m.Lease != nil {
		ls.Owner, ls.Until = m.Lease.Owner, m.Lease.Until.UTC()
	}
	return ls, nil
}

func streamStatus(ctx context.Context, c *Conn, name string) (StreamStatus, error) {
	ss := StreamStatus{Name: name}
	s, err := c.JS.Stream(ctx, name)
	if errors.Is(err, js.ErrStreamNotFound) {
		return ss, nil
	}
	if err != nil {
		return ss, classify("stream "+name, err)
	}
	info := s.CachedInfo()
	ss.Exists = true
	ss.Messages, ss.Bytes = info.State.Msgs, info.State.Bytes
	ss.FirstSeq, ss.LastSeq = info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs > 0 {
		ss.FirstTime, ss.LastTime = info.State.FirstTime.UTC(), info.State.LastTime.UTC()
	}
	ss.MaxAge, ss.MaxBytes, ss.Duplicates = info.Config.MaxAge, info.Config.MaxBytes, info.Config.Duplicates
	ss.Metadata = info.Config.Metadata
	ss.Replicas = info.Config.Replicas
	ss.ReplicasOffline = offlineReplicas(info)
	return ss, nil
}

// offlineReplicas names the stream's replicas its leader has not heard
// from (none for a stream without replicas).
func offlineReplicas(info *js.StreamInfo) []string {
	ci := info.Cluster
	if ci == nil {
		return nil
	}
	// A peer the leader has not heard from since it was elected shows
	// active 0 (a CI run: WEBHOOKS' leader moved off the killed node,
	// whose replica then never showed): silent once the leader has led
	// for replicaSilentAfter.
	led := ci.LeaderSince != nil && time.Since(*ci.LeaderSince) >= replicaSilentAfter
	var off []string
	for _, r := range ci.Replicas {
		if r != nil && (r.Offline || !r.Current && (r.Active >= replicaSilentAfter || r.Active == 0 && led)) {
			off = append(off, r.Name)
		}
	}
	return off
}

// NoQuorum says why a replicated stream cannot take writes now: fewer of
// its replicas online (its leader counts as one) than a write needs, more
// than half. nil when it can, or when it has one replica. A leader left
// alone by a cluster that lost most of its nodes still answers the
// stream's info, so /readyz said ready while every webhook got 503 (a
// cluster audit, stop 39).
func NoQuorum(info *js.StreamInfo) error {
	n := info.Config.Replicas
	if n <= 1 {
		return nil
	}
	if ci := info.Cluster; ci != nil && ci.Leader == "" {
		// A leader that stepped down for want of peers leaves the
		// survivor answering the info with no leader and its peers
		// "active 0", which offlineReplicas counts only under a leader:
		// /readyz said ready for the whole outage (a cluster audit, stop
		// 41).
		return fmt.Errorf("%w: stream %s has no leader now (being elected, or too few of its %d replicas online to elect one)",
			ErrUnavailable, info.Config.Name, n)
	}
	off := offlineReplicas(info)
	if online, need := n-len(off), n/2+1; online < need {
		return fmt.Errorf("%w: stream %s has %d of %d replicas online, fewer than the %d a write needs (offline: %s)",
			ErrUnavailable, info.Config.Name, online, n, need, strings.Join(off, ", "))
	}
	return nil
}

func bucketStatus(ctx context.Context, c *Conn, name string) (BucketStatus, error) {
	bs := BucketStatus{Name: name}
	kv, err := c.JS.KeyValue(ctx, name)
	if errors.Is(err, js.ErrBucketNotFound) {
		return bs, nil
	}
	if err != nil {
		return bs, classify("bucket "+name, err)
	}
	s, err := kv.Status(ctx)
	if err != nil {
		return bs, classify("bucket "+name, err)
	}
	bs.Exists = true
	bs.Values, bs.Bytes, bs.TTL, bs.Metadata = s.Values(), s.Bytes(), s.TTL(), s.Metadata()
	if bst, ok := s.(*js.KeyValueBucketStatus); ok && bst.StreamInfo() != nil {
		bs.Replicas = bst.StreamInfo().Config.Replicas
		bs.ReplicasOffline = offlineReplicas(bst.StreamInfo())
	}
	if name == BucketMarks && bs.Values > 0 {
		// At most consumer.KeyShards per provider: cheap to list.
		st, err := c.JS.Stream(ctx, "KV_"+name)
		if err != nil {
			return bs, classify("bucket "+name, err)
		}
		info, err := st.Info(ctx, js.WithSubjectFilter(kvSubjectPrefix(name)+"*."+consumer.KeyShardToken+".*"))
		if err != nil {
			return bs, classify("bucket "+name, err)
		}
		bs.KeyShards = uint64(len(info.State.Subjects))
	}
	return bs, nil
}

// consumerListWait bounds the listing of a stream's consumers. The
// server answers a list only once every consumer on it answered: one
// whose servers are down (a downstream reader's, on a node lost) held it
// for 16-30 s, and status failed after three tries (review BI: for the
// whole outage of one node of three, while webhooks flowed).
const consumerListWait = 5 * time.Second

// consumerStatuses reads DurableApply on its own (its lag is what status
// is for), then lists the other durable consumers of WEBHOOKS and GRANTS
// within consumerListWait per stream; unlisted says what was not listed.
func consumerStatuses(ctx context.Context, c *Conn) (cs []ConsumerStatus, unlisted string, err error) {
	apply := ConsumerStatus{Stream: StreamWebhooks, Name: DurableApply}
	cons, err := c.JS.Consumer(ctx, StreamWebhooks, DurableApply)
	switch {
	case err == nil:
		apply = consumerStatus(cons.CachedInfo())
	case !errors.Is(err, js.ErrConsumerNotFound) && !errors.Is(err, js.ErrStreamNotFound):
		return nil, "", classify("consumer "+DurableApply+" of "+StreamWebhooks, err)
	}
	var others []ConsumerStatus
	var missed []string
	for _, stream := range []string{StreamWebhooks, StreamGrants} {
		s, err := c.JS.Stream(ctx, stream)
		if errors.Is(err, js.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, "", classify("stream "+stream, err)
		}
		lctx, cancel := context.WithTimeout(ctx, consumerListWait)
		l := s.ListConsumers(lctx)
		for ci := range l.Info() {
			// Ephemeral consumers (trace and replay scans) come and go;
			// only durable ones have a lag worth watching.
			if ci.Config.Durable == "" || stream == StreamWebhooks && ci.Name == DurableApply {
				continue
			}
			others = append(others, consumerStatus(ci))
		}
		err = l.Err()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, "", classify("list consumers of "+stream, err)
			}
			missed = append(missed, stream)
		}
	}
	if len(missed) > 0 {
		unlisted = fmt.Sprintf("the consumers of %s did not all answer within %s (a server holding one may be down): other durable consumers not all listed",
			strings.Join(missed, " and "), consumerListWait)
	}
	slices.SortFunc(others, func(a, b ConsumerStatus) int {
		return strings.Compare(a.Stream+"\x00"+a.Name, b.Stream+"\x00"+b.Name)
	})
	return append([]ConsumerStatus{apply}, others...), unlisted, nil
}

func consumerStatus(ci *js.ConsumerInfo) ConsumerStatus {
	pos := func(s js.SequenceInfo) Position {
		p := Position{ConsumerSeq: s.Consumer, StreamSeq: s.Stream}
		if s.Last != nil {
			p.Last = s.Last.UTC()
		}
		return p
	}
	return ConsumerStatus{
		Stream: ci.Stream, Name: ci.Name, Exists: true,
		NumPending: ci.NumPending, NumAckPending: ci.NumAckPending,
		NumRedelivered: ci.NumRedelivered, NumWaiting: ci.NumWaiting,
		Delivered: pos(ci.Delivered), AckFloor: pos(ci.AckFloor),
	}
}

// dlqByProvider sums the per-subject counts (dlq.<provider>.<account>).
func dlqByProvider(ctx context.Context, c *Conn) (map[string]uint64, error) {
	out := map[string]uint64{}
	s, err := c.JS.Stream(ctx, StreamDLQ)
	if err != nil {
		return nil, classify("stream "+StreamDLQ, err)
	}
	info, err := s.Info(ctx, js.WithSubjectFilter("dlq.>"))
	if err != nil {
		return nil, classify("stream "+StreamDLQ, err)
	}
	for subj, n := range info.State.Subjects {
		parts := strings.SplitN(subj, ".", 3)
		if len(parts) >= 2 {
			out[parts[1]] += n
		}
	}
	return out, nil
}

func dedupStatus(ctx context.Context, c *Conn, webhooks StreamStatus, horizon time.Duration, now time.Time) (DedupStatus, error) {
	d := DedupStatus{Horizon: horizon, Since: now.Add(-horizon).UTC(), Window: webhooks.Duplicates, KeyIndex: KeyIndexNone}
	switch webhooks.Metadata[KeyIndexMetadata] {
	case keyIndexKept:
		d.KeyIndex = KeyIndexKeeps
	case keyIndexPending:
		d.KeyIndex = KeyIndexPending
	}
	if !webhooks.Exists || webhooks.Messages == 0 {
		d.Known = true
		return d, nil
	}
	seq, at, found, err := firstSeqSince(ctx, c, StreamWebhooks, d.Since)
	if err != nil {
		return d, err
	}
	switch {
	case !found:
		d.Known = true
	case at.Before(d.Since):
		// The server ignored start_time (older than 2.11) and answered
		// with the first message: the count would be wrong.
	default:
		d.Known = true
		d.FirstSeq = seq
		if webhooks.LastSeq >= seq {
			d.StoreSize = webhooks.LastSeq - seq + 1
		}
	}
	return d, nil
}

// firstSeqSince asks the stream for its first message stored at or after
// since (the message-get API with start_time: one indexed lookup, no
// consumer). found is false when every message is older.
func firstSeqSince(ctx context.Context, c *Conn, stream string, since time.Time) (seq uint64, at time.Time, found bool, err error) {
	req, err := json.Marshal(struct {
		NextFor   string    `json:"next_by_subj"`
		StartTime time.Time `json:"start_time"`
		NoHeaders bool      `json:"no_hdr"`
	}{">", since.UTC(), true})
	if err != nil {
		return 0, time.Time{}, false, err
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := c.NC.RequestWithContext(tctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return 0, time.Time{}, false, classify("find first "+stream+" message since "+since.Format(time.RFC3339), err)
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq  uint64    `json:"seq"`
			Time time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, time.Time{}, false, fmt.Errorf("find first %s message since %s: bad answer: %w", stream, since.Format(time.RFC3339), err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(js.JSErrCodeMessageNotFound):
		return 0, time.Time{}, false, nil
	case resp.Error != nil:
		return 0, time.Time{}, false, fmt.Errorf("find first %s message since %s: %s (%d): %w", stream, since.Format(time.RFC3339), resp.Error.Description, resp.Error.ErrCode, ErrUnavailable)
	case resp.Message == nil:
		return 0, time.Time{}, false, nil
	}
	return resp.Message.Seq, resp.Message.Time, true, nil
}

// KeptFor is how long the running system remembers applied keys: APPLIED's
// TTL, or GRANTS' age limit where that is shorter (rules that remember
// their keys by their GRANTS messages). 0 when neither limits it or
// neither exists yet. It is what an operator command beside a running
// serve must take for the horizon: its own config's dedup.horizon may be
// longer (a file already edited for the next rollout), and an event
// judged within that horizon but forgotten by the system would apply
// twice (review V).
//
// After the horizon was raised, keys that expired under the old one stay
// forgotten: until the new horizon has passed since, KeptFor is the time
// since the first event whose key may still be remembered (metaKeptFrom).
//
// Each lookup rides out its stream's leader election (rideOutLeader): a
// replay asks before it reads.
func KeptFor(ctx context.Context, c *Conn) (time.Duration, error) {
	var (
		applied BucketStatus
		grants  StreamStatus
	)
	err := rideOutLeader(ctx, "bucket "+BucketApplied, readStall, func(ctx context.Context) (err error) {
		applied, err = bucketStatus(ctx, c, BucketApplied)
		return err
	})
	if err != nil {
		return 0, err
	}
	err = rideOutLeader(ctx, "stream "+StreamGrants, readStall, func(ctx context.Context) (err error) {
		grants, err = streamStatus(ctx, c, StreamGrants)
		return err
	})
	if err != nil {
		return 0, err
	}
	raised := time.Duration(0)
	if from, err := time.Parse(time.RFC3339Nano, applied.Metadata[metaKeptFrom]); err == nil {
		raised = max(time.Since(from), time.Nanosecond)
	}
	kept := time.Duration(0)
	for _, d := range []time.Duration{applied.TTL, grants.MaxAge, raised} {
		if d > 0 && (kept == 0 || d < kept) {
			kept = d
		}
	}
	return kept, nil
}

// OldestUnapplied is when the gateway stored the oldest event DurableApply
// has not acknowledged; zero when every stored event is acknowledged.
// Without the consumer (deleted, or none ever ran) every stored event is
// unapplied: the stream's first (review AR: it said none waits).
func OldestUnapplied(ctx context.Context, c *Conn) (time.Time, error) {
	s, err := c.JS.Stream(ctx, StreamWebhooks)
	if err != nil {
		return time.Time{}, classify("stream "+StreamWebhooks, err)
	}
	cons, err := s.Consumer(ctx, DurableApply)
	if errors.Is(err, js.ErrConsumerNotFound) {
		st := s.CachedInfo().State
		if st.Msgs == 0 {
			return time.Time{}, nil
		}
		return st.FirstTime, nil
	}
	if err != nil {
		return time.Time{}, classify("consumer "+DurableApply, err)
	}
	return oldestUnapplied(ctx, s, consumerStatus(cons.CachedInfo()))
}

// oldestUnapplied reads the time of the event after cs's ack floor, the
// oldest not acknowledged, from WEBHOOKS (s); zero when none waits.
func oldestUnapplied(ctx context.Context, s js.Stream, cs ConsumerStatus) (time.Time, error) {
	if cs.NumPending == 0 && cs.NumAckPending == 0 {
		return time.Time{}, nil
	}
	seq := cs.AckFloor.StreamSeq + 1
	for range 3 {
		m, err := s.GetMsg(ctx, seq)
		if err == nil {
			return m.Time, nil
		}
		if !errors.Is(err, js.ErrMsgNotFound) {
			return time.Time{}, classify("get "+StreamWebhooks, err)
		}
		// Aged out since the floor was read (or below the stream's
		// first sequence): the oldest left is the stream's first.
		info, err := s.Info(ctx)
		if err != nil {
			return time.Time{}, classify("stream "+StreamWebhooks, err)
		}
		if first := info.State.FirstSeq; first > seq {
			seq = first
		} else {
			return time.Time{}, nil
		}
	}
	return time.Time{}, nil
}

// Unsettled is the live consumer's (DurableApply's) ack floor and last
// delivery, in WEBHOOKS sequences: the events between them, floor
// excluded, were delivered to a serve and may still be in its hands
// (waiting out a retry's backoff), or were settled out of order. ok is
// false when there is no such consumer (none ever ran, or deleted).
func Unsettled(ctx context.Context, c *Conn) (floor, delivered uint64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cons, err := c.JS.Consumer(ctx, StreamWebhooks, DurableApply)
	if errors.Is(err, js.ErrConsumerNotFound) || errors.Is(err, js.ErrStreamNotFound) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, classify("consumer "+DurableApply, err)
	}
	info := cons.CachedInfo()
	return info.AckFloor.Stream, info.Delivered.Stream, true, nil
}
