package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// DurableApply is the durable consumer every hookgate instance shares.
const DurableApply = "hookgate-apply"

var (
	_ consumer.Grants      = (*Effects)(nil)
	_ consumer.DeadLetters = (*Effects)(nil)
	_ consumer.Unreader    = (*Source)(nil)
)

// Effects publishes to GRANTS and DLQ. Safe for concurrent use.
type Effects struct {
	js  js.JetStream
	nc  *nats.Conn
	pub *Publisher
}

// NewEffects returns the GRANTS/DLQ publisher.
func NewEffects(c *Conn) *Effects {
	return &Effects{js: c.JS, nc: c.JS.Conn(), pub: NewPublisher(c, 5*time.Second)}
}

// grantPublishLimit bounds the retries of one GRANTS publish: longer than
// a stream leader election.
const grantPublishLimit = 20 * time.Second

// PublishGrant implements consumer.Grants: body and Hookgate-* headers,
// Nats-Msg-Id = key; a duplicate is success.
func (e *Effects) PublishGrant(ctx context.Context, subject, key string, header http.Header, body []byte) (uint64, error) {
	seq, err := e.publishGrant(ctx, subject, key, grantHeader(header), body)
	return seq, storeTrouble(err)
}

// grantHeader is what a GRANTS message carries of an event's headers: the
// Hookgate-* ones.
func grantHeader(header http.Header) nats.Header {
	h := nats.Header{}
	for name, v := range header {
		if strings.HasPrefix(name, event.HeaderPrefix) {
			h[name] = v
		}
	}
	return h
}

func (e *Effects) publishGrant(ctx context.Context, subject, key string, h nats.Header, body []byte) (uint64, error) {
	// A publish that timed out may have been stored: retry it with the
	// same Nats-Msg-Id (a duplicate then) rather than report a failure
	// that lets newer events overtake an event already in GRANTS.
	res, err := e.pub.Publish(ctx, Message{Subject: subject, Key: key, Header: h, Body: body, Deadline: time.Now().Add(grantPublishLimit), RideOutReconnect: true})
	if err != nil {
		return 0, err
	}
	return res.Seq, nil
}

// DeadLetter implements consumer.DeadLetters: the original body and
// headers plus reason and deliveries on dlq.<provider>.<account>.
func (e *Effects) DeadLetter(ctx context.Context, ev consumer.Event, reason string, deliveries int) (uint64, error) {
	h := nats.Header{}
	for name, v := range ev.Header {
		h[name] = v
	}
	h.Set(event.HeaderDlqReason, oneLine(reason))
	h.Set(event.HeaderDlqDeliveries, strconv.Itoa(deliveries))
	h.Set(event.HeaderStoredSeq, strconv.FormatUint(ev.Seq, 10))
	subj := LetterSubject(ev.Provider, ev.Account)
	// One letter per stored event: a redelivery after a lost ack is a
	// duplicate here.
	id := fmt.Sprintf("%s|%d", ev.Key, ev.Seq)
	if prev := ev.Header.Get(event.HeaderDlqPreviousSeq); prev != "" {
		id += "|" + prev
	}
	msg := &nats.Msg{Subject: subj, Header: h, Data: ev.Body}
	ack, err := e.js.PublishMsg(ctx, msg, js.WithMsgID(id))
	if err == nil && ack.Duplicate && e.letterGone(ctx, ack.Sequence) {
		// The letter this id wrote is no longer in DLQ (dlq remove, or
		// re-fed), and the event is dead-lettered again (a replay after
		// the remove): a new letter, not a repeat of that one. Within
		// dedup.window it was dropped as a duplicate while the replay
		// said "dead-lettered, see dlq list" (audit 42).
		ack, err = e.js.PublishMsg(ctx, msg, js.WithMsgID(id+"|"+strconv.FormatInt(time.Now().UnixNano(), 10)))
	}
	if err != nil {
		if ae := (*js.APIError)(nil); errors.As(err, &ae) {
			// nats.go wraps the server's refusal, whose text starts
			// "nats: API error", in one more "nats: " (an operations
			// audit, stop 41: "nats: nats: API error" in every line).
			err = ae
		}
		err = fullHint(subj, classify("dead-letter "+subj, err))
		if errors.Is(err, ErrStreamFull) || errors.Is(err, ErrTooLarge) {
			// DLQ refuses until an operator raises its limit or removes
			// letters: the event waits without holding a worker.
			err = storeFull{err}
		}
		return 0, err
	}
	return ack.Sequence, nil
}

// letterGone reports whether DLQ no longer holds the letter at seq; false
// when it cannot tell (the letter is then taken as there, as before).
func (e *Effects) letterGone(ctx context.Context, seq uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, StreamDLQ)
	if err != nil {
		return false
	}
	_, err = s.GetMsg(ctx, seq)
	return errors.Is(err, js.ErrMsgNotFound)
}

// storeFull is err marked consumer.ErrStoreFull without a word more: its
// text already says the stream is full, and "store full: " before it put
// the operation in the middle of the line.
type storeFull struct{ error }

func (e storeFull) Unwrap() []error { return []error{e.error, consumer.ErrStoreFull} }

// LetterSubject is the DLQ subject of a provider and raw account's
// letters.
func LetterSubject(provider, account string) string {
	return "dlq." + provider + "." + event.Token(account)
}

func oneLine(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	if len(s) > 1000 {
		s = s[:1000] + "..."
	}
	return s
}

// SourceOptions configure the durable consumer.
type SourceOptions struct {
	// MaxAckPending bounds unacknowledged deliveries across all
	// instances: those in an instance's memory and those waiting out a
	// retry's backoff (negatively acknowledged with a delay).
	MaxAckPending int
	// Prefetch is how many deliveries the source asks for ahead of Next;
	// 0: a quarter of MaxAckPending, at least 16.
	Prefetch int
	// AckWait is how long a delivery may stay unacked without
	// InProgress before it is redelivered.
	AckWait time.Duration
	// Log (nil: none) gets the pull's errors it recovers from by itself
	// ("no responders", a leader change) at debug, and a warning once they
	// have kept failing for WarnAfter (again every minute while they do);
	// one that ends the pull (the durable consumer deleted, the connection
	// closed) Next returns.
	Log *slog.Logger
	// WarnAfter: 0 is 10 s.
	WarnAfter time.Duration
	// OnLost (nil: not checked) is told of stored events that left
	// WEBHOOKS before the durable consumer ever delivered them: sequences
	// first to last, gone at retention.webhooks.max_age while nothing
	// applied (WEBHOOKS refuses deletes and purges, and DiscardNew never
	// drops, so max_age is the only way out). Found at OpenSource (the
	// stream's first sequence past the consumer's last delivery) and when
	// a first delivery skips sequences that are no longer stored; called
	// from OpenSource or Next, so it must not block long.
	OnLost func(first, last uint64)
}

// pullExpiry is how long each pull request waits at the server. Short, so
// that a pull is never cut off while deliveries may be on their way (its
// deliveries would be lost in transit until the ack wait): at a stop the
// source lets the current one end by itself. A pull request that dies
// unanswered (its consumer leader's node lost, a reconnect) ends on the
// client a second after its expiry; one answered "no responders" (no
// leader reachable) at once, and the source then waits for the consumer's
// leader to answer (awaitPullResponder) before it pulls again. The cost
// while idle: one pull request and its timeout a second.
const pullExpiry = time.Second

// pullPause spaces pulls that fail at once (a connection reconnecting, an
// unexpected error), so they do not spin.
const pullPause = 250 * time.Millisecond

// Source delivers WEBHOOKS events from the durable consumer. Its own
// goroutine pulls one batch of up to prefetch deliveries at a time, on an
// inbox of its own, and hands each to Next; the next batch is asked for
// once Next has taken the last. So the deliveries fetched and not yet
// taken are at most prefetch, none is dropped between NATS and Next, and
// a stop loses none in transit (Unread waits for the pull to end, up to
// unreadWait; what comes after is handed back at once). It tells a
// delivery from the pull's status messages by its $JS.ACK reply subject,
// as seqReader does: nats.go's Fetch, used before, took a stored event
// with a Status header and an empty body (stored so by a release before
// stop 29) for a status of the pull and never handed it over, so it came
// back after every ack wait, for good; and a delivery that came after
// Fetch's batch had ended was dropped, back only after the ack wait.
// (nats.go's message
// iterator, used before, kept deliveries in a channel as large as its
// prefetch, heartbeats included, and dropped one when that overflowed
// while every worker was busy; its Consume, tried next, drops past 64 MB
// queued and pulled a whole batch again every 2 s after a reconnect while
// its callback waited (review C). A dropped delivery came back only after
// the ack wait, when newer events of its subject had applied and turned it
// stale.)
type Source struct {
	cons     js.Consumer
	nc       *nats.Conn
	pullSubj string
	prefetch int
	// deliveries is unbuffered: the pull loop hands each delivery over.
	deliveries chan *nats.Msg
	stop       context.CancelFunc
	ended      chan struct{} // closed when the pull loop has returned
	mu         sync.Mutex
	cause      error       // why the pull loop ended by itself (nil: Stop, Unread)
	kept       []*nats.Msg // fetched and not handed over when it was stopped
	unread     bool        // Unread has taken kept
	health     pullHealth
	// Used by the pull loop only: its inbox (pull N answers on inbox.N),
	// the subscription and its channel, large enough for every delivery
	// the server may send it (inboxCapacity), so nats.go never drops one
	// for a full channel.
	inbox string
	sub   *nats.Subscription
	msgs  chan *nats.Msg
	pulls int
	// dropped is how many deliveries nats.go had dropped from sub when
	// reportDrops last looked.
	dropped int
	// open has the pulls the server may still answer with deliveries, by
	// reply subject: not ended by a status of theirs, nor filled.
	open map[string]*openPull
	// maxBytes bounds the bytes one pull may bring (see pullMaxBytes).
	maxBytes int
	// For OnLost, used by Next only: the stream's handle, and the
	// highest sequence first delivered (0: none yet).
	onLost    func(first, last uint64)
	js        js.JetStream
	lastFirst uint64
	// retries: the events handed back with a delay (a retry's backoff)
	// and not delivered again yet; sweeper, set once OpenSource has
	// settled OnLost, is what sweepRetries tells (nil: nothing).
	retries retryWaits
	sweeper atomic.Pointer[retrySweeper]
}

// pullMaxBytes is how many bytes one pull asks for at most: twice the
// largest message the server takes (so any message fits), and at least
// 16 MiB (so small events still come a whole batch at a time). Without a
// bound, a batch of large events (64 of 1 MB) arriving faster than the
// client read them went past the server's pending limit for the
// connection (64 MB by default): the server cut it off as a slow
// consumer, and the deliveries in flight came back only after the ack
// wait, behind newer events (a CI run: "delivery 40 is event 78").
func pullMaxBytes(maxPayload int64) int {
	return int(max(2*maxPayload+64<<10, 16<<20))
}

// pullHealth tells the log when pulls keep failing: a consumer without a
// leader for long (a cluster that lost its quorum), a refusal that does
// not go away. Used by the pull loop only.
type pullHealth struct {
	log       *slog.Logger
	warnAfter time.Duration
	failing   time.Time // since when pulls fail; zero while they work
	warned    time.Time // the last warning; zero: none in this streak
}

// fail logs err at debug, and warns when pulls have failed for warnAfter
// and no warning came in the last pullWarnEvery.
func (h *pullHealth) fail(err error) {
	now := time.Now()
	if h.failing.IsZero() {
		h.failing = now
	}
	h.log.Debug("consumer pull", slog.String("error", err.Error()))
	if now.Sub(h.failing) >= h.warnAfter && now.Sub(h.warned) >= pullWarnEvery {
		h.warned = now
		h.log.Warn("consumer pulls keep failing: no event is taken", slog.String("error", err.Error()), slog.Duration("for", now.Sub(h.failing).Round(time.Second)))
	}
}

// ok ends a streak of failures, saying so if it was warned of.
func (h *pullHealth) ok() {
	if !h.warned.IsZero() {
		h.log.Info("consumer pulls work again", slog.Duration("failed_for", time.Since(h.failing).Round(time.Second)))
	}
	h.failing, h.warned = time.Time{}, time.Time{}
}

// pullWarnEvery spaces pullHealth's warnings within one streak.
const pullWarnEvery = time.Minute

// OpenSource creates or updates the durable consumer and starts pulling.
func OpenSource(ctx context.Context, c *Conn, o SourceOptions) (*Source, error) {
	cons, err := provisionSource(ctx, c, o)
	if err != nil {
		return nil, err
	}
	return openSource(ctx, c, o, cons)
}

// ProvisionSource creates the durable consumer, or brings it to o, as
// OpenSource does, without pulling: a serve that must stand by (another
// holds the consumer lock) still stops before it listens when the consumer
// cannot be made.
func ProvisionSource(ctx context.Context, c *Conn, o SourceOptions) error {
	_, err := provisionSource(ctx, c, o)
	return err
}

func provisionSource(ctx context.Context, c *Conn, o SourceOptions) (js.Consumer, error) {
	var cons js.Consumer
	err := retryProvision(ctx, func(ctx context.Context) (err error) {
		// The consumer's creation time, kept in its metadata: the server
		// gives a consumer it recovers at a restart a new Created (the
		// embedded server restarts with each serve; review AY).
		created := time.Now().UTC()
		if have, err := c.JS.Consumer(ctx, StreamWebhooks, DurableApply); err == nil {
			created = consumerCreated(have.CachedInfo())
		} else if !errors.Is(err, js.ErrConsumerNotFound) {
			return classify("read consumer "+DurableApply+" on "+StreamWebhooks, err)
		}
		cons, err = c.JS.CreateOrUpdateConsumer(ctx, StreamWebhooks, js.ConsumerConfig{
			Metadata:      map[string]string{consumerCreatedMetadata: created.Format(time.RFC3339Nano)},
			Durable:       DurableApply,
			Description:   "hookgate: applies each stored webhook once",
			FilterSubject: "webhooks.>",
			AckPolicy:     js.AckExplicitPolicy,
			AckWait:       o.AckWait,
			// Attempts are counted by the processor, which dead-letters with
			// the reason; the server must not drop a message silently.
			MaxDeliver:    -1,
			MaxAckPending: o.MaxAckPending,
			DeliverPolicy: js.DeliverAllPolicy,
		})
		return classify("create consumer "+DurableApply+" on "+StreamWebhooks, err)
	})
	return cons, err
}

func openSource(ctx context.Context, c *Conn, o SourceOptions, cons js.Consumer) (*Source, error) {
	pullSubj := pullSubject(StreamWebhooks, DurableApply)
	awaitPullResponder(ctx, c.JS.Conn(), pullSubj, pullExpiry)
	prefetch := o.Prefetch
	if prefetch <= 0 {
		prefetch = max(o.MaxAckPending/4, 16)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	warnAfter := o.WarnAfter
	if warnAfter <= 0 {
		warnAfter = 10 * time.Second
	}
	s, err := startSource(cons, c.JS.Conn(), pullSubj, prefetch, inboxCapacity(cons.CachedInfo().Config.MaxAckPending, prefetch), pullHealth{log: log, warnAfter: warnAfter})
	if err != nil || o.OnLost == nil {
		return s, err
	}
	s.onLost, s.js = o.OnLost, c.JS
	defer func() {
		// The pull loop's look at retries (sweepRetries) starts once
		// this is settled: the loop runs already.
		if s.onLost != nil {
			s.sweeper.Store(&retrySweeper{tell: s.onLost, js: s.js})
		}
	}()
	// A consumer that never delivered (new, or created again) has no
	// last delivery to count from: what it will not deliver is not told.
	// Nor is what was stored before it was created: created again, it
	// delivers the whole stream anew (DeliverAll), and an event that
	// leaves before it gets there may have been applied by the one
	// deleted (review AX: told lost "before they were applied"). Its
	// creation time is kept with it, so this holds across restarts; a
	// consumer reset (RedeliverOutstanding) keeps it too.
	// The stored events before its creation are those before the first
	// one stored since, when an older one is still stored; with none
	// older left, what is gone may be either, and is told.
	info := cons.CachedInfo()
	st, err := c.JS.Stream(ctx, StreamWebhooks)
	var seq uint64
	var found bool
	if err == nil && st.CachedInfo().State.Msgs > 0 {
		seq, _, found, err = firstSeqSince(ctx, c, StreamWebhooks, consumerCreated(info))
	}
	if err != nil {
		if ctx.Err() == nil {
			// Not when stopping (a backup's pause cuts a reopen short).
			log.Warn("events that leave WEBHOOKS at max_age before they are applied are not told by this run",
				slog.String("error", err.Error()))
		}
		s.onLost = nil
		return s, nil
	}
	state := st.CachedInfo().State
	var before uint64 // the last event stored before the consumer's creation
	switch {
	case state.Msgs == 0:
	case !found:
		before = state.LastSeq
	case seq > state.FirstSeq:
		before = seq - 1
	}
	if before > info.Delivered.Stream {
		s.lastFirst = before
		return s, nil
	}
	if s.lastFirst = info.Delivered.Stream; s.lastFirst > 0 {
		// Gone while nothing pulled (serve stopped, or gateway-only),
		// told now, not at the next event, when an event after them is
		// stored (its delivery, coming next, moves the consumer's last
		// delivery past them). With the stream empty nothing moves it:
		// told now, they were told again at every later open (a restart,
		// a lock handover) until an event came (review AX); they are told
		// at the first delivery instead (message).
		s.tellLost(state, 0)
	}
	return s, nil
}

// consumerCreatedMetadata is the durable consumer's metadata key holding
// when hookgate created it (RFC 3339).
const consumerCreatedMetadata = "hookgate_created"

// consumerCreated is when the durable consumer was created: its metadata,
// or, for one created by an earlier release, the server's Created (reset
// at each server restart: the later of the two times, so nothing stored
// before the creation is told).
func consumerCreated(info *js.ConsumerInfo) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, info.Config.Metadata[consumerCreatedMetadata]); err == nil {
		return t
	}
	return info.Created
}

// lostBefore reads WEBHOOKS' state and tells what is lost before next
// (tellLost).
func (s *Source) lostBefore(ctx context.Context, next uint64) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, StreamWebhooks)
	if err != nil {
		s.health.log.Warn("could not check whether stored events left WEBHOOKS before they were applied",
			slog.Uint64("after_seq", s.lastFirst), slog.String("error", err.Error()))
		return
	}
	s.tellLost(st.CachedInfo().State, next)
}

// tellLost tells OnLost of the sequences after lastFirst and before next
// that WEBHOOKS (as of state) no longer stores, and moves lastFirst past
// them. next 0 (at open): before the first stored event, nothing when
// none is stored.
func (s *Source) tellLost(state js.StreamState, next uint64) {
	if state.FirstSeq == 0 {
		return // a stream that never stored anything
	}
	if next == 0 {
		if state.Msgs == 0 {
			return
		}
		next = state.FirstSeq
	}
	// Stored sequences are contiguous (no deletes): those below the
	// first are gone.
	gone := state.FirstSeq - 1
	if last := min(gone, next-1); last > s.lastFirst {
		s.onLost(s.lastFirst+1, last)
		s.lastFirst = last
	}
}

// inboxCapacity is how many messages the pull inbox's channel holds: every
// delivery the durable consumer may have outstanding (maxAckPending, as
// the server holds it after the creation or update: the server sends no
// more, whichever pulls are open on the inbox), and the
// six whole batches the pull loop's own bookkeeping allows besides (a
// pull's, and late ones of pulls given up on: one every 2 s at most, so
// five within openPullMaxAge), with room for their statuses. Sized by the
// pulls alone (256 for a batch of 32), it overflowed in a CI run 41 ms
// after a standby took over from a killed holder: nats.go dropped
// deliveries, and 53 events came back one ack wait later, behind newer
// events of their subjects, stale. What filled it is not known; sized so,
// only a server sending beyond the consumer's own limit could. The cost:
// a pointer per slot (4224 + 256 slots for the defaults: 35 KB).
func inboxCapacity(maxAckPending, prefetch int) int {
	return max(maxAckPending, 0) + 6*prefetch + 64
}

// startSource subscribes the pull inbox, its channel holding capacity
// messages, and starts the pull loop on pullSubj (cons answers Pending
// and the pull's "is it gone" question).
func startSource(cons js.Consumer, nc *nats.Conn, pullSubj string, prefetch, capacity int, health pullHealth) (*Source, error) {
	lctx, stop := context.WithCancel(context.Background())
	s := &Source{cons: cons, nc: nc, pullSubj: pullSubj, prefetch: prefetch,
		deliveries: make(chan *nats.Msg), stop: stop, ended: make(chan struct{}),
		health: health, inbox: nc.NewInbox(), msgs: make(chan *nats.Msg, capacity),
		open:     map[string]*openPull{},
		maxBytes: pullMaxBytes(nc.MaxPayload())}
	var err error
	if s.sub, err = nc.ChanSubscribe(s.inbox+".*", s.msgs); err != nil {
		stop()
		return nil, classify("subscribe to the pull inbox", err)
	}
	go s.pull(lctx)
	return s, nil
}

// pull fetches batches and hands their deliveries to Next until ctx ends or
// the pull cannot go on (the durable consumer deleted, the connection
// closed: s.cause).
func (s *Source) pull(ctx context.Context) {
	defer close(s.ended)
	defer s.endSubscription()
	defer s.awaitOpenPulls(ctx)
	for ctx.Err() == nil {
		if st := s.nc.Status(); st != nats.CONNECTED && st != nats.CLOSED {
			// A pull published while reconnecting fails at once.
			pause(ctx, pullPause)
			continue
		}
		err := s.pullOnce(ctx)
		s.reportDrops()
		s.sweepRetries(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			// The batch is complete or the pull expired: pull again.
			s.health.ok()
		case errors.Is(err, js.ErrConsumerDeleted), errors.Is(err, nats.ErrConnectionClosed), s.nc.IsClosed():
			s.end(err)
			return
		case errors.Is(err, nats.ErrNoResponders):
			// No leader answered: the consumer may be gone (deleted while
			// no pull waited, so no 409 told), else its leader is moving.
			s.health.fail(err)
			if s.gone(ctx) {
				return
			}
			awaitPullResponder(ctx, s.nc, s.pullSubj, pullExpiry)
		default:
			if limit, ok := batchLimit(err.Error()); ok && limit < s.prefetch {
				// The server's max_request_batch (an external server's
				// limit, every new consumer's default): pull no more.
				s.health.log.Info("consumer pulls fewer at a time: the server's limit", slog.Int("prefetch", limit), slog.Int("asked", s.prefetch))
				s.prefetch = limit
				continue
			}
			s.health.fail(err)
			pause(ctx, pullPause)
		}
	}
}

// reportDrops logs, once per new drop, deliveries nats.go dropped from the
// pull inbox (its channel was full): they come back only after the ack
// wait, behind newer events of their subjects. With the pulls the source
// has open and the channel's fill, so that a drop can be explained: one
// right after a consumer takeover (a CI run) overflowed a channel then
// sized for six whole batches, and could not be placed. Sized now for the
// consumer's whole window (inboxCapacity), a drop means the server sent
// beyond it.
func (s *Source) reportDrops() {
	d, err := s.sub.Dropped()
	if err != nil || d <= s.dropped {
		return
	}
	left := 0
	for _, p := range s.open {
		left += p.left
	}
	s.health.log.Warn("deliveries dropped from the pull inbox (its channel was full): they come back after the ack wait, behind newer events of their subjects",
		slog.Int("dropped", d-s.dropped), slog.Int("pulls_sent", s.pulls), slog.Int("pulls_open", len(s.open)),
		slog.Int("open_left", left), slog.Int("queued", len(s.msgs)), slog.Int("capacity", cap(s.msgs)), slog.Int("batch", s.prefetch))
	s.dropped = d
}

// errPullStatus is a status that ended a pull with an error: its
// description ("Exceeded MaxRequestBatch of 100", "Leadership Change").
type errPullStatus string

func (e errPullStatus) Error() string { return string(e) }

// openPull is a pull the server may still answer: sent at sent, with left
// of its batch to come.
type openPull struct {
	sent  time.Time
	batch int
	left  int
}

// openPullMaxAge is how long an open pull is waited for at all: a pull
// given up on (see pullOnce) that the server took late still expires a
// second after it took it; one older than this was lost.
const openPullMaxAge = 10 * time.Second

// pullOnce asks for up to prefetch deliveries and gives them to Next, in
// order, until the pull ends: prefetch deliveries came for it, or a status
// of it (408 at its expiry, 404, 409, 503), or nothing for a second past
// its expiry, since the request or the last delivery handed over (a pull
// lost with its consumer leader's node, or in a reconnect; it stays open,
// see awaitOpenPulls). A delivery is handed over whichever pull it answers
// (one that comes late is no less outstanding), and counted for that pull
// only: counted for the current one, a late delivery of a pull given up
// on ended it early while the server still had it open, and at a stop the
// deliveries the server then sent it went to an inbox no longer read,
// back only after the ack wait, behind newer events. Once ctx ends, the
// rest of the pull's deliveries, up to its end, are kept for Unread. A
// nil error: pull again.
func (s *Source) pullOnce(ctx context.Context) error {
	s.pulls++
	reply := s.inbox + "." + strconv.Itoa(s.pulls)
	req := fmt.Appendf(nil, `{"batch":%d,"expires":%d,"max_bytes":%d}`, s.prefetch, pullExpiry.Nanoseconds(), s.maxBytes)
	now := time.Now()
	for r, p := range s.open {
		if now.Sub(p.sent) > openPullMaxAge {
			delete(s.open, r)
		}
	}
	if err := s.nc.PublishRequest(s.pullSubj, reply, req); err != nil {
		return err
	}
	s.open[reply] = &openPull{sent: now, batch: s.prefetch, left: s.prefetch}
	lost := time.NewTimer(pullExpiry + time.Second)
	defer lost.Stop()
	for s.open[reply] != nil {
		var m *nats.Msg
		select {
		case m = <-s.msgs:
		case <-lost.C:
			return nil
		}
		ended, err := s.take(ctx, m)
		if ended == reply {
			return err
		}
		if isDelivery(m) {
			// The time a delivery waited for Next (every worker busy) is
			// not the server's: a pull is lost only when nothing came for
			// a second past its expiry since then. Counted from the
			// request, a slow Next gave up pulls still being answered,
			// pulled a whole batch more every 2 s, and nats.go dropped
			// deliveries once the inbox's channel was full (review AK).
			lost.Reset(pullExpiry + time.Second)
		}
	}
	return nil
}

// take counts m for the pull it answers: a delivery goes to Next (kept for
// Unread once ctx has ended), a status ends its pull. It returns the reply
// subject of the pull m ended, if any, and for a status that ended a pull
// with an error, that error (see pullOnce).
func (s *Source) take(ctx context.Context, m *nats.Msg) (string, error) {
	p := s.open[m.Subject]
	if isDelivery(m) {
		// An event taken ends any streak of failed pulls: pulls that
		// end refused while others bring events do not mean "no event is
		// taken" (a resource audit, stop 39: large bodies drew 409
		// "Exceeds MaxBytes" answers, and that warning, for 30 s while 10
		// to 16 events a second were applied).
		s.health.ok()
		if ctx.Err() != nil {
			s.keep(m)
		} else {
			select {
			case s.deliveries <- m:
			case <-ctx.Done():
				s.keep(m)
			}
		}
		if p != nil {
			if p.left--; p.left == 0 {
				delete(s.open, m.Subject)
				return m.Subject, nil
			}
		}
		return "", nil
	}
	status := m.Header.Get("Status")
	if p == nil || status == "100" {
		return "", nil // an ended pull's, a heartbeat or flow control
	}
	delete(s.open, m.Subject)
	switch status {
	case "404", "408":
		return m.Subject, nil // no messages, or the pull expired
	case "503":
		return m.Subject, nats.ErrNoResponders
	case "409":
		desc := m.Header.Get("Description")
		if strings.Contains(strings.ToLower(desc), "consumer deleted") {
			return m.Subject, js.ErrConsumerDeleted
		}
		if p.left < p.batch && strings.Contains(desc, "Exceeds MaxBytes") || strings.Contains(desc, "Batch Completed") {
			return m.Subject, nil // the pull's bytes are used up: pull again
		}
		return m.Subject, errPullStatus(desc)
	}
	return m.Subject, errPullStatus("pull answered " + status + " " + m.Header.Get("Description"))
}

// awaitOpenPulls, at a stop, keeps the inbox read, and what comes on it
// kept for Unread, until no pull is open any more, or nothing came for a
// second past a pull's expiry: a pull given up on and taken late by the
// server may still bring deliveries (each of them outstanding until the
// ack wait if no one read it).
func (s *Source) awaitOpenPulls(ctx context.Context) {
	if ctx.Err() == nil || s.nc.IsClosed() {
		return // the consumer or the connection is gone: nothing comes
	}
	quiet := time.NewTimer(pullExpiry + time.Second)
	defer quiet.Stop()
	for len(s.open) > 0 {
		select {
		case m := <-s.msgs:
			_, _ = s.take(ctx, m)
			quiet.Reset(pullExpiry + time.Second)
		case <-quiet.C:
			return
		}
	}
}

// endSubscription ends the pull inbox's subscription, keeping for Unread
// any delivery still in its channel.
func (s *Source) endSubscription() {
	_ = s.sub.Unsubscribe()
	for {
		select {
		case m := <-s.msgs:
			if isDelivery(m) {
				s.keep(m)
			}
		default:
			return
		}
	}
}

// keep holds msg for Unread; after Unread has returned (it gave up waiting
// for the pull loop) it hands msg back at once instead, so it does not wait
// out the ack wait.
func (s *Source) keep(msg *nats.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unread {
		_ = s.nc.Publish(msg.Reply, ackNak)
		return
	}
	s.kept = append(s.kept, msg)
}

// gone reports whether the durable consumer no longer exists (and ends the
// source with that cause). The answer to that is immediate; a consumer
// without a leader (being elected) does not answer, and its wait is kept
// short: the leader is what the source waits for next.
func (s *Source) gone(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(ctx, goneWait)
	defer cancel()
	_, err := s.cons.Info(ictx)
	if errors.Is(err, js.ErrConsumerNotFound) || errors.Is(err, js.ErrStreamNotFound) {
		s.end(err)
		return true
	}
	return false
}

// goneWait bounds gone's question.
const goneWait = 500 * time.Millisecond

// end records why the pull loop ends by itself.
func (s *Source) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cause = err
}

// closed is Next's error once the pull loop has ended: wrapping
// js.ErrMsgIteratorClosed and its cause, if any.
func (s *Source) closed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause == nil {
		return js.ErrMsgIteratorClosed
	}
	return fmt.Errorf("%w: durable consumer %s on %s: %w", js.ErrMsgIteratorClosed, DurableApply, StreamWebhooks, s.cause)
}

// pullSubject is where a consumer's pull requests go; only the consumer's
// leader subscribes to it.
func pullSubject(stream, durable string) string {
	return "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + durable
}

// pullProbe is a pull request the consumer's leader refuses ("400 Bad
// Request": it is not JSON) without delivering anything.
var pullProbe = []byte("{")

// awaitPullResponder waits, for up to bound, until a request on subject
// from nc reaches a responder: the consumer's leader. A consumer just
// created in a cluster answers its creation from its new leader before
// the leader's interest in its pull subject has reached every server: a
// pull request sent through another server in that window is answered
// "no responders" (nats.go's message iterator, used before, then waited
// for two missed heartbeats, 5 s). Measured on a 3-node cluster: 8 of 300
// pulls sent right after a creation got "no responders", 0 of 300 after
// this wait; in a CI run the instance holding the consumer lock applied
// nothing for its first 3 s, and was killed so. Past bound the pull goes
// ahead anyway, so this never fails a start.
func awaitPullResponder(ctx context.Context, nc *nats.Conn, subject string, bound time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := nc.RequestWithContext(rctx, subject, pullProbe)
		rcancel()
		// Any answer is the leader's: the 400 for the probe, or another
		// status nats.go turns into an error.
		if err == nil || !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return
		}
		if pause(ctx, pullProbePause) != nil {
			return
		}
	}
}

// pause waits d or until ctx ends; ctx's error then.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pullProbePause spaces the probes of awaitPullResponder.
const pullProbePause = 20 * time.Millisecond

// Pending returns the consumer's lag: undelivered plus unacked.
func (s *Source) Pending(ctx context.Context) (uint64, error) {
	info, err := s.cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// Stop ends pulling; Next then returns an error once the current pull has
// ended (a Next at that moment may still get one of its deliveries).
// Deliveries fetched and not taken come back after the ack wait.
func (s *Source) Stop() { s.stop() }

// unreadWait bounds Unread's wait for the pull loop to end: longer than a
// pull (pullExpiry, and nats.go's second of grace) started while a
// reconnect holds the connection (up to nats.Timeout, 5 s; review F).
const unreadWait = 10 * time.Second

// Unread implements consumer.Unreader: it stops pulling and returns the
// deliveries already received that Next has not returned (they would
// otherwise wait out the ack wait), oldest first. Next returns an error
// afterwards.
func (s *Source) Unread() []*consumer.Message {
	s.stop()
	select {
	case <-s.ended:
	case <-time.After(unreadWait):
	}
	s.mu.Lock()
	kept := s.kept
	s.kept, s.unread = nil, true
	s.mu.Unlock()
	var out []*consumer.Message
	for _, msg := range kept {
		if m, ok := s.message(msg); ok {
			out = append(out, m)
		}
	}
	return out
}

// Next blocks until a message arrives or ctx ends; once the pull has ended
// (Stop, Unread, the durable consumer deleted, the connection closed) it
// returns an error wrapping js.ErrMsgIteratorClosed and the cause.
func (s *Source) Next(ctx context.Context) (*consumer.Message, error) {
	for {
		select {
		case msg := <-s.deliveries:
			if m, ok := s.message(msg); ok {
				return m, nil
			}
		case <-s.ended:
			return nil, s.closed()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// message reads a delivery; one without JetStream metadata is terminated.
func (s *Source) message(msg *nats.Msg) (*consumer.Message, bool) {
	meta, err := msg.Metadata()
	if err != nil {
		_ = s.nc.Publish(msg.Reply, ackTerm)
		return nil, false
	}
	if meta.NumDelivered > 1 {
		s.retries.came(meta.Sequence.Stream)
	}
	if seq := meta.Sequence.Stream; s.onLost != nil && meta.NumDelivered == 1 && seq > s.lastFirst {
		// First deliveries come in stream order: a skip is events that
		// left the stream undelivered, or deliveries lost on their way
		// (still stored: they come again after the ack wait).
		if s.lastFirst > 0 && seq > s.lastFirst+1 {
			s.lostBefore(context.Background(), seq)
		}
		s.lastFirst = seq
	}
	return &consumer.Message{
		Event:      EventFromMsg(msg.Header, msg.Data, meta.Sequence.Stream),
		Deliveries: int(meta.NumDelivered),
		Delivery:   delivery{m: msg, nc: s.nc, seq: meta.Sequence.Stream, retries: &s.retries},
	}, true
}

// EventFromMsg rebuilds a consumer.Event from a stored message.
func EventFromMsg(h nats.Header, body []byte, seq uint64) consumer.Event {
	get := func(name string) string {
		if v := h[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	value := func(name string) string { return event.ExtractedValue(h, name) }
	ev := consumer.Event{
		Key:         get(event.HeaderKey),
		Provider:    get(event.HeaderProvider),
		Account:     value(event.HeaderAccount),
		Subject:     value(event.HeaderSubject),
		Type:        value(event.HeaderType),
		OccurredRaw: value(event.HeaderOccurredAt),
		Seq:         seq,
		Header:      http.Header(h),
		Body:        body,
	}
	if ev.Key == "" {
		ev.Key = get(nats.MsgIdHdr)
	}
	if t, err := time.Parse(time.RFC3339Nano, get(event.HeaderReceivedAt)); err == nil {
		ev.ReceivedAt = t
	}
	return ev
}

type delivery struct {
	m   *nats.Msg
	nc  *nats.Conn
	seq uint64
	// retries (nil: not tracked) is told of a negative acknowledgement
	// with a delay, and of the ack.
	retries *retryWaits
}

// The acknowledgements a delivery's reply subject takes.
var (
	ackAck      = []byte("+ACK")
	ackNak      = []byte("-NAK")
	ackTerm     = []byte("+TERM")
	ackProgress = []byte("+WPI")
)

var _ consumer.ConfirmedNaker = delivery{}

// NakWithDelayConfirmed implements consumer.ConfirmedNaker: the negative
// acknowledgement as a request, which the server answers once it has
// processed it.
func (d delivery) NakWithDelayConfirmed(ctx context.Context, t time.Duration) error {
	_, err := d.nc.RequestWithContext(ctx, d.m.Reply, nakBody(t))
	if err == nil {
		d.retries.wait(d.seq)
	}
	return asNotConnected(err)
}

func nakBody(t time.Duration) []byte {
	if t > 0 {
		return fmt.Appendf(nil, `-NAK {"delay": %d}`, t.Nanoseconds())
	}
	return ackNak
}

// Ack does not wait for the server to confirm: a lost ack only means a
// redelivery, which the applied-key check answers already-applied.
// Their errors say "not connected" for nats.go's refusal to buffer while
// reconnecting (asNotConnected).
func (d delivery) Ack(ctx context.Context) error {
	d.retries.came(d.seq)
	return asNotConnected(d.nc.Publish(d.m.Reply, ackAck))
}
func (d delivery) NakWithDelay(t time.Duration) error {
	err := d.nc.Publish(d.m.Reply, nakBody(t))
	if err == nil {
		d.retries.wait(d.seq)
	}
	return asNotConnected(err)
}
func (d delivery) InProgress() error { return asNotConnected(d.nc.Publish(d.m.Reply, ackProgress)) }

// RedeliverOutstanding makes the durable consumer's outstanding deliveries
// (delivered, not acknowledged) due again at once: it resets the consumer
// to its ack floor, so the next pulls get every event above the floor
// again, in stream order, before anything newer. For a caller that is the
// consumer's only client (the embedded server, whose data_dir lock keeps
// other processes out): what is outstanding then was fetched by a process
// that is gone (a kill -9). Left alone, those deliveries come back only
// after the ack wait, behind newer events of their subjects, which by then
// have applied and turned them stale.
//
// The price: events settled above the floor run again (applied ones are
// found already applied), and the redelivery counts start over (an event
// being retried gets its consumer.max_deliver attempts anew: refusing
// while any redelivery was outstanding left the fix out of most
// handovers, a CI run lost 2 of 1324 events to it). So it does nothing
// when more than maxSettled settled events lie between the ack floor and
// the last delivery, or the first event above the floor was stored before
// storedSince (ErrTooFarBehind: an event settled longer ago than
// dedup.horizon is no longer remembered as applied, and under ordering
// none would apply again). Outstanding deliveries do not count against
// maxSettled: they run again whichever way, and left to the ack wait they
// come back behind newer events. (They did count, and a store outage that
// parked a full window of never-tried events behind one stuck subject
// made the reset refuse exactly when it was needed: after the disk was
// freed, the parked events came back stale; a resource audit, stop 39.)
// It returns how many deliveries were outstanding, the first stream
// sequence delivered again and the last one delivered before the reset
// (0, 0, 0 when nothing was outstanding or the consumer does not exist
// yet). With an error, outstanding is 0 when the consumer's info never
// came (the count is not known), else the count.
//
// A request the store does not answer, or answers that it has no leader
// (a cluster restarting, a leader moving), is sent again, each bounded,
// for up to redeliverWait in all: the consumer starts pulling only after
// this (a single 5 s try failed after a whole-cluster restart, and the
// deliveries came back after the ack wait).
func RedeliverOutstanding(ctx context.Context, c *Conn, maxSettled uint64, storedSince time.Time) (outstanding int, from, through uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, redeliverWait)
	defer cancel()
	var info *js.ConsumerInfo
	err = retryTransient(ctx, redeliverWait, func(ctx context.Context) error {
		cons, err := c.JS.Consumer(ctx, StreamWebhooks, DurableApply)
		if err != nil {
			return classify("consumer info", err)
		}
		info = cons.CachedInfo()
		return nil
	})
	if errors.Is(err, js.ErrConsumerNotFound) || errors.Is(err, js.ErrStreamNotFound) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, err
	}
	if info.NumAckPending == 0 {
		return 0, 0, 0, nil
	}
	again := info.Delivered.Stream - info.AckFloor.Stream
	settled := again - min(again, uint64(info.NumAckPending))
	// Deliveries already retried count too: a reset makes each due at
	// once with its attempts anew, and thousands waiting out a receiver's
	// backoff would all hit it at once (found by review). Outstanding
	// ones delivered once (never tried, or waiting their first retry)
	// do not.
	if n := settled + uint64(max(info.NumRedelivered, 0)); n > maxSettled {
		return info.NumAckPending, 0, 0, fmt.Errorf("%w: %d settled and %d retried events between the ack floor (%d) and the last delivery (%d), more than %d", ErrTooFarBehind, settled, info.NumRedelivered, info.AckFloor.Stream, info.Delivered.Stream, maxSettled)
	}
	// Every event above the floor was stored after the first one, and
	// settled after it was stored.
	var first StoredMsg
	err = retryTransient(ctx, redeliverWait, func(ctx context.Context) (err error) {
		first, err = GetMsg(ctx, c, StreamWebhooks, info.AckFloor.Stream+1)
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return info.NumAckPending, 0, 0, fmt.Errorf("%w: stream sequence %d, above the ack floor, is gone", ErrTooFarBehind, info.AckFloor.Stream+1)
	case err != nil:
		return info.NumAckPending, 0, 0, fmt.Errorf("read the first event above the ack floor: %w", err)
	case first.Time.Before(storedSince):
		return info.NumAckPending, 0, 0, fmt.Errorf("%w: the first event above the ack floor was stored at %s, before %s", ErrTooFarBehind, first.Time.UTC().Format(time.RFC3339), storedSince.UTC().Format(time.RFC3339))
	}
	// A reset sent again after its answer was lost resets to the same
	// floor: nothing pulls from the consumer meanwhile.
	err = retryTransient(ctx, redeliverWait, func(ctx context.Context) (err error) {
		from, err = resetConsumer(ctx, c)
		return err
	})
	if err != nil {
		return info.NumAckPending, 0, 0, err
	}
	return info.NumAckPending, from, info.Delivered.Stream, nil
}

// redeliverWait bounds RedeliverOutstanding's retries (see there): about
// the time a cluster takes to elect its leaders after a restart, and no
// longer than an operator waits for the consumer to start.
const redeliverWait = 30 * time.Second

// resetConsumer resets DurableApply to its ack floor (the server's
// consumer reset) and returns the first stream sequence delivered again.
func resetConsumer(ctx context.Context, c *Conn) (uint64, error) {
	resp, err := c.NC.RequestWithContext(ctx, "$JS.API.CONSUMER.RESET."+StreamWebhooks+"."+DurableApply, nil)
	if err != nil {
		return 0, classify("reset consumer", err)
	}
	var r struct {
		Error    *js.APIError `json:"error"`
		ResetSeq uint64       `json:"reset_seq"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return 0, fmt.Errorf("reset consumer: unreadable answer: %w", err)
	}
	if r.Error != nil {
		// An answer that the consumer has no leader now is tried again
		// (classify makes it transient); any other refusal stands.
		if err := classify("reset consumer", r.Error); r.Error.ErrorCode != 0 && transient(err) {
			return 0, err
		}
		return 0, fmt.Errorf("reset consumer: %w", r.Error)
	}
	return r.ResetSeq, nil
}
