package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// BucketApplied remembers applied keys for the dedup horizon (bucket TTL).
const BucketApplied = "APPLIED"

var (
	_ consumer.Watermarks  = (*Watermarks)(nil)
	_ consumer.AppliedKeys = (*AppliedKeys)(nil)
)

// KVConfig is what ProvisionKV needs.
type KVConfig struct {
	Replicas int
	Horizon  time.Duration
}

// ProvisionKV creates or updates the WATERMARKS and APPLIED buckets.
// A longer horizon than APPLIED had is recorded in its metadata
// (metaKeptFrom): the keys that expired under the old one are gone.
func ProvisionKV(ctx context.Context, j js.JetStream, c KVConfig) (*Watermarks, *AppliedKeys, error) {
	return consumerBuckets(ctx, j, c, func(ctx context.Context, cfg js.KeyValueConfig) (js.KeyValue, error) {
		if cfg.Bucket == BucketApplied {
			// Ridden out: serves starting together on a cluster, one
			// asked the bucket another had just made while its replicas
			// elected a leader, and the unanswered request failed its
			// start (a CI run, stop 41).
			err := retryTransient(ctx, 30*time.Second, func(ctx context.Context) error {
				prev, err := j.KeyValue(ctx, cfg.Bucket)
				if errors.Is(err, js.ErrBucketNotFound) {
					return nil
				}
				if err != nil {
					if cerr := classify("open KV "+cfg.Bucket, err); transient(cerr) {
						return cerr
					}
					return nil // not there (or unreadable): provisionBucket says
				}
				st, err := prev.Status(ctx)
				if err != nil {
					return classify("open KV "+cfg.Bucket, err)
				}
				cfg.Metadata = keptMetadata(st.TTL(), st.Metadata(), cfg.TTL, time.Now())
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		return provisionBucket(ctx, j, c.Replicas, cfg)
	})
}

// metaKeptFrom, in APPLIED's metadata, is the RFC 3339 time before which
// events may have been forgotten though the bucket's TTL would cover them:
// the horizon was raised (dedup.horizon 96h -> 120h), and keys that had
// expired under the old one do not come back. Absent once the TTL alone
// bounds what is remembered again.
const metaKeptFrom = "hookgate_applied_kept_from"

// keptMetadata is APPLIED's metadata for a TTL changed from oldTTL to ttl
// at now (0: keys never expire), from its metadata before (meta).
func keptMetadata(oldTTL time.Duration, meta map[string]string, ttl time.Duration, now time.Time) map[string]string {
	out := map[string]string{}
	for k, v := range meta {
		if k != metaKeptFrom {
			out[k] = v
		}
	}
	from, _ := time.Parse(time.RFC3339Nano, meta[metaKeptFrom])
	if oldTTL > 0 && (ttl == 0 || ttl > oldTTL) {
		// Raised: what was stored before now-oldTTL is forgotten.
		if f := now.Add(-oldTTL); f.After(from) {
			from = f
		}
	}
	if !from.IsZero() && (ttl == 0 || from.After(now.Add(-ttl))) {
		out[metaKeptFrom] = from.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// OpenKV returns the WATERMARKS and APPLIED buckets for an operator
// command: one that exists is used as it is, never changed (serve
// provisions them from its config, and a command's config may be a copy
// edited for the next rollout); a missing one is created from c (a
// gateway-only serve creates none), which discards nothing. Each bucket's
// opening rides out its stream's leader election (rideOutLeader, for as
// long as Read does): it is the first request of replay and dlq replay.
func OpenKV(ctx context.Context, j js.JetStream, c KVConfig) (*Watermarks, *AppliedKeys, error) {
	return consumerBuckets(ctx, j, c, func(ctx context.Context, cfg js.KeyValueConfig) (kv js.KeyValue, err error) {
		err = rideOutLeader(ctx, "bucket "+cfg.Bucket, readStall, func(ctx context.Context) error {
			var err error
			kv, err = j.KeyValue(ctx, cfg.Bucket)
			if errors.Is(err, js.ErrBucketNotFound) {
				// A create whose answer was lost is found by the next
				// attempt's lookup.
				kv, err = j.CreateKeyValue(ctx, bucketConfig(c.Replicas, cfg))
				if errors.Is(err, js.ErrBucketExists) { // created meanwhile
					kv, err = j.KeyValue(ctx, cfg.Bucket)
				}
			}
			return classify("open KV "+cfg.Bucket, err)
		})
		return kv, err
	})
}

// consumerBuckets gets WATERMARKS and APPLIED, as c sets them up, with
// open.
func consumerBuckets(ctx context.Context, j js.JetStream, c KVConfig, open func(context.Context, js.KeyValueConfig) (js.KeyValue, error)) (*Watermarks, *AppliedKeys, error) {
	if _, err := open(ctx, js.KeyValueConfig{
		Bucket:      BucketMarks,
		Description: "hookgate: newest applied occurred_at per subject, changed only by compare-and-set",
	}); err != nil {
		return nil, nil, err
	}
	applied, err := open(ctx, js.KeyValueConfig{
		Bucket:      BucketApplied,
		Description: "hookgate: keys applied within the dedup horizon",
		TTL:         c.Horizon,
	})
	if err != nil {
		return nil, nil, err
	}
	nc := j.Conn()
	return newWatermarks(nc, BucketMarks),
		&AppliedKeys{kv: applied, nc: nc, pre: kvSubjectPrefix(BucketApplied), timeout: storeTimeout}, nil
}

// provisionBucket creates or updates a file-stored bucket keeping one
// value per key, on replicas (at least 1).
func provisionBucket(ctx context.Context, j js.JetStream, replicas int, cfg js.KeyValueConfig) (kv js.KeyValue, err error) {
	cfg = bucketConfig(replicas, cfg)
	err = retryProvision(ctx, func(ctx context.Context) (err error) {
		kv, err = j.CreateOrUpdateKeyValue(ctx, cfg)
		return classify("provision KV "+cfg.Bucket, err)
	})
	return kv, err
}

// bucketConfig is cfg as hookgate keeps every bucket: file-stored, one
// value per key, on replicas (at least 1).
func bucketConfig(replicas int, cfg js.KeyValueConfig) js.KeyValueConfig {
	cfg.History, cfg.Storage, cfg.Replicas = 1, js.FileStorage, max(replicas, 1)
	return cfg
}

// kvSubjectPrefix is where a bucket's keys are written (no JetStream
// domain: hookgate has none).
func kvSubjectPrefix(bucket string) string { return "$KV." + bucket + "." }

// Watermarks is a bucket of Marks changed only by compare-and-set:
// WATERMARKS, and HOOKGATE_LOCKS for the consumer lock. Safe for
// concurrent use.
//
// Reads and writes are plain requests to the bucket's stream (what
// KeyValue.Get and KeyValue.Create/Update send): keys are hookgate's own
// encoded tokens, so nats.go's key validation is not needed, and its
// decoding of the answers was most of a call's client-side cost.
type Watermarks struct {
	nc      *nats.Conn
	pre     string        // where keys are written
	getPre  string        // where a key's last entry is read (direct get)
	timeout time.Duration // bounds each call, besides ctx
}

func newWatermarks(nc *nats.Conn, bucket string) *Watermarks {
	pre := kvSubjectPrefix(bucket)
	return &Watermarks{nc: nc, pre: pre, getPre: "$JS.API.DIRECT.GET.KV_" + bucket + "." + pre, timeout: storeTimeout}
}

// Get implements consumer.Watermarks. A mark an operator deleted (nats kv
// del or purge) reads as the zero Mark at the delete marker's revision,
// so a Put at that revision writes over it.
func (w *Watermarks) Get(ctx context.Context, key string) (consumer.Mark, uint64, error) {
	resp, err := request(ctx, w.nc, &nats.Msg{Subject: w.getPre + key}, w.timeout)
	if err != nil {
		return consumer.Mark{}, 0, classify("get watermark "+key, err)
	}
	switch st := resp.Header.Get("Status"); st {
	case "":
	case "404":
		return consumer.Mark{}, 0, nil
	default:
		return consumer.Mark{}, 0, classify("get watermark "+key, fmt.Errorf("nats: %s %s", st, resp.Header.Get("Description")))
	}
	rev, err := strconv.ParseUint(resp.Header.Get(js.SequenceHeader), 10, 64)
	if err != nil || rev == 0 {
		return consumer.Mark{}, 0, fmt.Errorf("watermark %s: answer without a revision", key)
	}
	m, _, err := decodeMark(key, resp.Header, resp.Data)
	if err != nil {
		return consumer.Mark{}, 0, err
	}
	return m, rev, nil
}

// decodeMark reads a WATERMARKS entry. A delete or purge marker (a marker
// the server wrote too, as nats.go reads them: hookgate's bucket sets no
// LimitMarkerTTL, an operator's may) is the zero Mark, deleted true.
func decodeMark(key string, h nats.Header, data []byte) (m consumer.Mark, deleted bool, err error) {
	switch op := h.Get(kvOperationHeader); {
	case op == "DEL", op == "PURGE", h.Get(markerReasonHeader) != "":
		return consumer.Mark{}, true, nil
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return consumer.Mark{}, false, fmt.Errorf("watermark %s: corrupt entry: %w", key, err)
	}
	return m, false, nil
}

// kvOperationHeader marks a KV entry's delete or purge;
// markerReasonHeader a delete marker the server wrote.
const (
	kvOperationHeader  = "KV-Operation"
	markerReasonHeader = "Nats-Marker-Reason"
)

// Put implements consumer.Watermarks: a create when rev is 0, else an
// update (compare-and-set); a lost race is consumer.ErrConflict. A create
// fails on any entry, a delete marker too: Get gives its revision.
func (w *Watermarks) Put(ctx context.Context, key string, m consumer.Mark, rev uint64) (uint64, error) {
	b, err := appendMark(make([]byte, 0, 256), m)
	if err != nil {
		return 0, err
	}
	h := nats.Header{js.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)}}
	ack, err := storeMsg(ctx, w.nc, &nats.Msg{Subject: w.pre + key, Header: h, Data: b}, w.timeout)
	switch {
	case err == nil:
		return ack.Seq, nil
	case conflict(err):
		return 0, fmt.Errorf("put watermark %s: %w", key, consumer.ErrConflict)
	}
	return 0, classify("put watermark "+key, err)
}

// conflict: a compare-and-set found another revision.
func conflict(err error) bool {
	c := apiCode(err)
	return c == codeWrongLastSequence || c == codeWrongLastSeqConstant
}

// AppliedKeys is the APPLIED bucket: one entry per applied key, expiring
// after the horizon. Safe for concurrent use.
// Like Watermarks, it writes with storeMsg.
type AppliedKeys struct {
	kv      js.KeyValue
	nc      *nats.Conn
	pre     string
	timeout time.Duration // bounds each write, besides ctx
}

// appliedKVKey maps an idempotency key (any printable ASCII) to a KV key.
func appliedKVKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(sum[:18])
}

// Seen implements consumer.AppliedKeys.
func (a *AppliedKeys) Seen(ctx context.Context, key string) (bool, error) {
	_, err := a.kv.Get(ctx, appliedKVKey(key))
	if errors.Is(err, js.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, classify("applied lookup", err)
	}
	return true, nil
}

// Remember implements consumer.AppliedKeys.
func (a *AppliedKeys) Remember(ctx context.Context, key string) error {
	if _, err := storeMsg(ctx, a.nc, &nats.Msg{Subject: a.pre + appliedKVKey(key), Data: []byte(key)}, a.timeout); err != nil {
		return classify("remember applied", err)
	}
	return nil
}

// retryProvision runs op with retryTransient for up to 30 s. Provisioning
// is idempotent, and a clustered server can leave a request unanswered: an
// update of a stream whose create (by another hookgate starting at the
// same moment) is still in flight gets no reply, and neither does that
// create (nats-server 2.15.2). An update refused that way is retried too
// (Provision reports it as a conflict).
func retryProvision(parent context.Context, op func(context.Context) error) error {
	return retryTransient(parent, 30*time.Second, op)
}

// retryTransient runs op until it succeeds, fails for a reason that is not
// transient (see there), or budget passes; then it returns op's last
// error. Each attempt has 5 s: a request sent to a stream leader that died
// is never answered, and the one sent again once a new leader is elected
// (seconds) is. op must be safe to repeat (it may have taken effect when
// its answer was lost).
func retryTransient(parent context.Context, budget time.Duration, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, budget)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		// Each attempt gets its own deadline: with the overall one alone, a
		// request left unanswered would use up all of it.
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		err := op(actx)
		acancel()
		// A closed connection does not come back (nats.go reconnects an
		// open one for good).
		if err == nil || !transient(err) || errors.Is(err, nats.ErrConnectionClosed) {
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(parent.Err(), context.Canceled) {
				// Stopped (a SIGTERM while the store does not answer yet):
				// say so, so that the caller stops cleanly rather than
				// report the last attempt's trouble as a failure
				// (review 10). A deadline, the caller's or ours, is the
				// store's trouble: the last attempt says what it was.
				return fmt.Errorf("%w (last attempt: %v)", parent.Err(), err)
			}
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// NotAnswering reports whether err says the store did not answer (yet):
// nothing listening at the NATS address, no answer in time, a cluster
// without quorum or still electing. Worth trying again later, unlike a
// refusal or a mistake that cannot pass by itself: credentials refused or
// unreadable, TLS the server does not offer or a certificate not trusted
// (Connect's other errors), a server without JetStream (no responders).
func NotAnswering(err error) bool {
	switch {
	case !transient(err), errors.Is(err, ErrAuthorization):
		return false
	case errors.Is(err, errConnect):
		return errors.Is(err, ErrNoServer) || errors.Is(err, nats.ErrTimeout)
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, js.ErrNoStreamResponse), errors.Is(err, js.ErrJetStreamNotEnabled):
		return false
	}
	return true
}

// NoPeers reports the cluster's answer that fewer JetStream servers are
// online than a stream's replicas need ("no suitable peers for
// placement"): servers still starting, or nats.replicas above the
// cluster's size. An answer, not silence: said as such.
func NoPeers(err error) bool { return apiCode(err) == codeClusterNoPeers }

// transient: no answer (timeout, no responders, disconnected), or a
// cluster that is still forming or electing (no peers online for the
// replicas yet, no meta leader), as opposed to an answer that refuses.
func transient(err error) bool {
	if !errors.Is(err, ErrUnavailable) {
		return false
	}
	switch apiCode(err) {
	case 0, codeClusterNoPeers, codeClusterNotAvailable, codeClusterNotLeader:
		return true
	}
	return false
}
