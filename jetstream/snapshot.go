package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// BackupStreams are the streams a backup holds, in the order it takes
// them. The backup pauses every consumer first (SubjectPause), so nothing
// is applied while it reads them: the marks, applied keys, GRANTS
// messages and the consumer's acknowledgements (in WEBHOOKS's snapshot)
// are of one moment, and the events stored while it reads are in WEBHOOKS,
// not yet applied. (Read while the consumer applied, the streams held an
// event's ack without its mark or a mark behind a GRANTS message, whatever
// their order: reviews AS, AT and BA.) DLQ comes first: an operator's `dlq
// replay` is not paused, and a letter it re-feeds meanwhile is then kept
// with its event applied, not lost. HOOKGATE_LOCKS is left out: its
// entries are the running serves' locks, meaningless to a restored one.
var BackupStreams = []string{StreamDLQ, "KV_" + BucketMarks, "KV_" + BucketApplied, StreamGrants, StreamWebhooks, StreamAudit}

// SnapshotInfo is what the server said of a stream as its snapshot began.
type SnapshotInfo struct {
	Config json.RawMessage // the stream's configuration, as the server reports it
	State  json.RawMessage // its state when the snapshot began
	Bytes  int64           // snapshot bytes written
}

// snapshotIdle bounds the wait for each chunk of a snapshot and for each
// answer during a restore: the server's own flow control gives up on a
// silent peer after 5 s.
const snapshotIdle = 30 * time.Second

const apiPrefix = "$JS.API."

// apiReply is the part of a JetStream API answer these calls read.
type apiReply struct {
	Error          *js.APIError    `json:"error"`
	Config         json.RawMessage `json:"config"`
	State          json.RawMessage `json:"state"`
	DeliverSubject string          `json:"deliver_subject"`
}

func (r apiReply) err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Snapshot writes a snapshot of stream and its consumers' state to w,
// through the JetStream API's snapshot endpoint, in the server's own
// format (an s2-compressed archive, which Restore sends back). It is
// consistent within the stream: the messages stored when it began (ones
// stored meanwhile may be in it too), then the consumers' state, read
// last. Returns ErrStreamNotFound (wrapped) when there is no such stream;
// w's errors are returned as they are; an interrupted snapshot leaves w
// holding a part that Restore refuses.
func Snapshot(ctx context.Context, c *Conn, stream string, w io.Writer) (SnapshotInfo, error) {
	var info SnapshotInfo
	inbox := c.NC.NewInbox()
	chunks := make(chan *nats.Msg, 512) // the server's window: 64 chunks of 128 KiB
	sub, err := c.NC.ChanSubscribe(inbox, chunks)
	if err != nil {
		return info, classify("snapshot "+stream, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(struct {
		Deliver string `json:"deliver_subject"`
	}{inbox})
	r, err := apiRequest(ctx, c, apiPrefix+"STREAM.SNAPSHOT."+stream, req)
	if err != nil {
		return info, classify("snapshot "+stream, err)
	}
	if err := r.err(); err != nil {
		if apiCode(err) == codeStreamNotFound {
			return info, fmt.Errorf("snapshot %s: %w", stream, ErrStreamNotFound)
		}
		return info, fmt.Errorf("snapshot %s: %w", stream, err)
	}
	info.Config, info.State = r.Config, r.State
	idle := time.NewTimer(snapshotIdle)
	defer idle.Stop()
	for {
		var m *nats.Msg
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("snapshot %s: %w", stream, ctx.Err())
		case <-idle.C:
			return info, fmt.Errorf("snapshot %s: %w: no chunk for %s", stream, ErrUnavailable, snapshotIdle)
		case m = <-chunks:
		}
		idle.Reset(snapshotIdle)
		if len(m.Data) == 0 {
			// The end: status 204, or the reason the server stopped.
			if s := m.Header.Get("Status"); s != "" && s != "204" {
				return info, fmt.Errorf("snapshot %s: the server stopped it: %s %s", stream, s, m.Header.Get("Description"))
			}
			return info, nil
		}
		if _, err := w.Write(m.Data); err != nil {
			return info, err
		}
		info.Bytes += int64(len(m.Data))
		if m.Reply != "" {
			if err := c.NC.Publish(m.Reply, nil); err != nil {
				return info, classify("snapshot "+stream, err)
			}
		}
	}
}

// ErrStreamNotFound: the stream is not on the server.
var ErrStreamNotFound = errors.New("stream not found")

// ErrStreamExists: Restore's stream is on the server already.
var ErrStreamExists = errors.New("stream exists")

// RestoreOptions adapt a restored stream to its new place.
type RestoreOptions struct {
	// Replicas (> 0) replaces the stream's replica count: the target's
	// config decides it.
	Replicas int
	// ClusterHorizon (> 0): the target is a cluster, where no embedded
	// key index keeps WEBHOOKS's keys (see StreamsConfig.KeyIndex). A
	// WEBHOOKS restored there loses the key index's mark (a gateway would
	// refuse it) and gets this duplicate window, as Provision gives a
	// cluster's.
	ClusterHorizon time.Duration
	// Unfinished (not ""): the restored stream carries it in its
	// metadata (RestoreMetadata) until FinishRestore takes it away, so a
	// restore stopped part way leaves streams every hookgate refuses
	// (UnfinishedRestore) instead of ones it runs on with events missing.
	Unfinished string
}

// RestoreMetadata is the metadata key of a restored stream whose restore
// has not finished; its value says which restore.
const RestoreMetadata = "hookgate_restore_unfinished"

// Restore creates a stream from a snapshot Snapshot wrote, read from r:
// its messages and its consumers with their state. config and state are
// the SnapshotInfo taken with it. Returns ErrStreamExists (wrapped) when
// the stream is on the server already, and the server's reason when it
// refuses the snapshot (a damaged or cut-short one).
func Restore(ctx context.Context, c *Conn, config, state json.RawMessage, o RestoreOptions, r io.Reader) error {
	var cfg map[string]json.RawMessage
	var name string
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("restore: stream config: %w", err)
	}
	if err := json.Unmarshal(cfg["name"], &name); err != nil || name == "" {
		return errors.New("restore: stream config names no stream")
	}
	if o.Replicas > 0 {
		cfg["num_replicas"] = json.RawMessage(fmt.Sprint(o.Replicas))
	}
	if cluster := name == StreamWebhooks && o.ClusterHorizon > 0; cluster || o.Unfinished != "" {
		meta := map[string]string{}
		if raw, ok := cfg["metadata"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &meta); err != nil {
				return fmt.Errorf("restore %s: metadata: %w", name, err)
			}
		}
		if cluster {
			delete(meta, KeyIndexMetadata)
			cfg["duplicate_window"] = json.RawMessage(fmt.Sprint(o.ClusterHorizon.Nanoseconds()))
		}
		if o.Unfinished != "" {
			meta[RestoreMetadata] = o.Unfinished
		}
		m, _ := json.Marshal(meta)
		cfg["metadata"] = m
	}
	req, err := json.Marshal(map[string]any{"config": cfg, "state": state})
	if err != nil {
		return fmt.Errorf("restore %s: %w", name, err)
	}
	ans, err := apiRequest(ctx, c, apiPrefix+"STREAM.RESTORE."+name, req)
	if err != nil {
		return classify("restore "+name, err)
	}
	if err := ans.err(); err != nil {
		if apiCode(err) == codeStreamNameExistRestore {
			return fmt.Errorf("restore %s: %w", name, ErrStreamExists)
		}
		return fmt.Errorf("restore %s: %w", name, err)
	}
	buf := make([]byte, 128<<10)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			// Each chunk is answered: empty when taken, else the reason.
			if err := restoreChunk(ctx, c, name, ans.DeliverSubject, buf[:n]); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("restore %s: read snapshot: %w", name, rerr)
		}
	}
	// An empty message ends it; the answer is the stream created, or why
	// not. The server opens the stream before answering: for a large one
	// that takes a while.
	done, err := requestDelivered(ctx, c, ans.DeliverSubject, nil, nil)
	if err != nil {
		return classify("restore "+name, err)
	}
	var fin apiReply
	if err := json.Unmarshal(done.Data, &fin); err != nil {
		return fmt.Errorf("restore %s: unreadable answer %q", name, done.Data)
	}
	if err := fin.err(); err != nil {
		return fmt.Errorf("restore %s: the server refused the snapshot: %w", name, err)
	}
	return nil
}

// FinishRestore takes RestoreMetadata off the named streams (the ones a
// restore made, in the order it made them), the restore's last step. It
// goes last to first, so the first one made (DLQ, which Provision looks
// at) is marked until every other is not. A stream that is gone is
// skipped; any other failure is returned, the streams before it still
// marked.
func FinishRestore(ctx context.Context, c *Conn, names []string) error {
	for _, name := range slices.Backward(names) {
		err := retryTransient(ctx, 30*time.Second, func(ctx context.Context) error {
			s, err := c.JS.Stream(ctx, name)
			if errors.Is(err, js.ErrStreamNotFound) {
				return nil
			}
			if err != nil {
				return classify("look up stream "+name, err)
			}
			cfg := s.CachedInfo().Config
			if _, ok := cfg.Metadata[RestoreMetadata]; !ok {
				return nil
			}
			cfg.Metadata = maps.Clone(cfg.Metadata)
			delete(cfg.Metadata, RestoreMetadata)
			if _, err := c.JS.UpdateStream(ctx, cfg); err != nil {
				return classify("unmark stream "+name, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// UnfinishedRestore returns ErrUnfinishedRestore, naming the streams and
// saying what to do, when any of hookgate's streams (BackupStreams)
// carries RestoreMetadata: a restore onto this server (a cluster's, or
// the embedded one's) stopped part way. nil when none does. For the
// operator commands: each stream is looked up once, for up to
// restoreMarkWait, and one that does not answer (its leader being
// elected, JetStream not there) is passed over, the command meeting that
// itself (Provision makes the same check on the streams it provisions,
// riding out elections). A lookup without a bound waited for the
// command's own 10 minutes during an election (a CI run).
func UnfinishedRestore(ctx context.Context, j js.JetStream) error {
	var marked []string
	for _, name := range BackupStreams {
		lctx, cancel := context.WithTimeout(ctx, restoreMarkWait)
		s, err := j.Stream(lctx, name)
		cancel()
		if err != nil {
			continue
		}
		if _, ok := s.CachedInfo().Config.Metadata[RestoreMetadata]; ok {
			marked = append(marked, name)
		}
	}
	if len(marked) == 0 {
		return nil
	}
	return unfinishedRestoreError(marked)
}

// restoreMarkWait bounds each of UnfinishedRestore's lookups.
const restoreMarkWait = 3 * time.Second

// unfinishedRestoreError is ErrUnfinishedRestore naming the marked streams
// and what to do.
func unfinishedRestoreError(marked []string) error {
	return fmt.Errorf("the NATS server holds %w (hookgate restore was stopped part way; streams with its mark: %s; the streams it made are incomplete, and events of the backup would be missing without a word): delete hookgate's streams there (whichever of %s exist) and run hookgate restore again",
		ErrUnfinishedRestore, strings.Join(marked, ", "), strings.Join(BackupStreams, ", "))
}

// nats-server's JSStreamNameExistRestoreFailedErr and JSStreamNotFoundErr.
const (
	codeStreamNameExistRestore = 10130
	codeStreamNotFound         = 10059
)

func restoreChunk(ctx context.Context, c *Conn, name, subject string, chunk []byte) error {
	cctx, cancel := context.WithTimeout(ctx, snapshotIdle)
	defer cancel()
	m, err := requestDelivered(cctx, c, subject, chunk, nil)
	if err != nil {
		return classify("restore "+name, err)
	}
	if len(m.Data) == 0 {
		return nil
	}
	var a apiReply
	if err := json.Unmarshal(m.Data, &a); err != nil || a.Error == nil {
		return fmt.Errorf("restore %s: unexpected answer %q", name, m.Data)
	}
	return fmt.Errorf("restore %s: the server refused the snapshot: %w", name, a.Error)
}

// requestDelivered is a request to a restore's deliver subject. On a
// cluster the server that took the restore may not be the one this
// connection is on, and the interest in that subject reaches this one a
// moment later: until it does, the request finds no responder (a test run
// here: KV_APPLIED's restore began on another server than the two before
// it, and failed with "no responders"). Nothing was delivered then, so it
// is sent again, for up to noResponderWait; retrying (may be nil) is
// called before each time.
func requestDelivered(ctx context.Context, c *Conn, subject string, data []byte, retrying func()) (*nats.Msg, error) {
	end := time.Now().Add(noResponderWait)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		m, err := c.NC.RequestWithContext(ctx, subject, data)
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(end) {
			return m, err
		}
		if retrying != nil {
			retrying()
		}
		if err := pause(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// noResponderWait bounds requestDelivered's tries.
const noResponderWait = 10 * time.Second

// apiRequest sends a JetStream API request and reads its answer.
func apiRequest(ctx context.Context, c *Conn, subject string, req []byte) (apiReply, error) {
	var a apiReply
	cctx, cancel := context.WithTimeout(ctx, snapshotIdle)
	defer cancel()
	m, err := c.NC.RequestWithContext(cctx, subject, req)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return a, fmt.Errorf("unreadable answer %q", m.Data)
	}
	return a, nil
}
