package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// SubjectInstances is the core NATS subject every running serve answers on
// with a report of itself (`hookgate status` lists them). Core NATS, not
// JetStream: a serve whose store stopped writing still answers, and says so.
const SubjectInstances = "hookgate.instances"

// AnswerInstances answers each request on SubjectInstances with report's
// bytes, from its own goroutine, until stop is called or the connection
// closes. report is called once per request, one at a time, so it must
// answer at once; it must be safe for concurrent use with the rest of the
// process. A subscription the server's permissions deny is an error.
func AnswerInstances(c *Conn, report func() []byte) (stop func(), err error) {
	return answer(c, SubjectInstances, report)
}

// answer is AnswerInstances on any subject.
func answer(c *Conn, subject string, report func() []byte) (stop func(), err error) {
	sub, err := c.NC.Subscribe(subject, func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		_ = m.Respond(report())
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	// The server refuses a subscription its permissions deny after
	// Subscribe returned: its -ERR comes before the answer to a flush.
	if c.NC.FlushTimeout(5*time.Second) == nil {
		if le := deniedOn(c, subject); le != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("subscribe %s: %w", subject, le)
		}
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// AskOptions bound AskInstances.
type AskOptions struct {
	// Wait is the longest the answers are waited for.
	Wait time.Duration
	// Quiet ends the wait that long after the last answer (more instances
	// answer within it on a healthy cluster).
	Quiet time.Duration
}

// ErrNoAnswer is AskInstances finding nothing subscribed to
// SubjectInstances (the server says so at once), or no answer in time.
var ErrNoAnswer = errors.New("no hookgate serve answered")

// ErrNoSubscriber is the ErrNoAnswer (both match) of nothing subscribed to
// the subject asked: no serve is connected, as against serves that did not
// answer in time.
var ErrNoSubscriber = errors.New("nothing subscribes")

// AskInstances sends one request on SubjectInstances and returns the
// answers that came (in arrival order). With none it returns ErrNoAnswer,
// wrapped with why: no subscriber, or none in o.Wait (a serve too busy to
// answer, or NATS permissions that deny the subject).
func AskInstances(ctx context.Context, c *Conn, o AskOptions) ([][]byte, error) {
	answers, err := ask(ctx, c, SubjectInstances, o)
	if errors.As(err, new(noAnswerOn)) {
		return nil, fmt.Errorf("%w within %s", ErrNoAnswer, o.Wait)
	}
	return answers, err
}

// ask is AskInstances on any subject.
func ask(ctx context.Context, c *Conn, subject string, o AskOptions) ([][]byte, error) {
	inbox := c.NC.NewInbox()
	sub, err := c.NC.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("ask %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.NC.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("ask %s: %w", subject, err)
	}
	deadline := time.Now().Add(o.Wait)
	var answers [][]byte
wait:
	for {
		until := deadline
		if q := time.Now().Add(o.Quiet); len(answers) > 0 && q.Before(until) {
			until = q
		}
		left := time.Until(until)
		if left <= 0 {
			break
		}
		m, err := nextWithin(ctx, sub, left)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			// The server's answer when nothing subscribes to the subject.
			return nil, fmt.Errorf("%w: %w to %s", ErrNoAnswer, ErrNoSubscriber, subject)
		case err != nil && ctx.Err() != nil:
			return answers, ctx.Err()
		case err != nil:
			break wait // the wait ran out
		}
		answers = append(answers, m.Data)
	}
	if len(answers) == 0 {
		if le := deniedOn(c, subject); le != nil {
			// The permissions deny the request: say so, not "no answer".
			return nil, fmt.Errorf("ask %s: %w (%v)", subject, ErrPermissionDenied, le)
		}
		return nil, noAnswerOn{subject: subject, wait: o.Wait}
	}
	return answers, nil
}

// deniedOn is the connection's last error when it is the server refusing
// this user subject (a permissions violation naming it), else nil.
func deniedOn(c *Conn, subject string) error {
	if le := c.NC.LastError(); errors.Is(le, nats.ErrPermissionViolation) && strings.Contains(le.Error(), subject) {
		return le
	}
	return nil
}

// noAnswerOn is ask's ErrNoAnswer of something subscribed that did not
// answer in time (AskInstances words it as the serves it asks).
type noAnswerOn struct {
	subject string
	wait    time.Duration
}

func (e noAnswerOn) Error() string {
	return fmt.Sprintf("something subscribes to %s but nothing answered within %s", e.subject, e.wait)
}

func (e noAnswerOn) Is(target error) bool { return target == ErrNoAnswer }

// nextWithin is the subscription's next message within d.
func nextWithin(ctx context.Context, sub *nats.Subscription, d time.Duration) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return sub.NextMsgWithContext(ctx)
}
