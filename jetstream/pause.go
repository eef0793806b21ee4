package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// SubjectPause is the core NATS subject on which every serve with the
// consumer role takes requests to stop applying events for a while (a
// backup's consistent cut: see BackupStreams), and to go on.
const SubjectPause = "hookgate.consumer.pause"

// PauseRequest asks the consumers to pause until For has passed since the
// request arrived (sent again to extend it), or, with Resume, to go on.
// ID names the pause: a resume ends only its own.
type PauseRequest struct {
	ID     string        `json:"id"`
	For    time.Duration `json:"for,omitempty"`
	Resume bool          `json:"resume,omitempty"`
}

// PauseAnswer is one serve's answer: sent once it applies nothing (the
// events under way finished, the rest handed back), or at once when it
// was not applying. Err says why it could not pause.
type PauseAnswer struct {
	Instance string `json:"instance"`
	Paused   bool   `json:"paused"`
	Applying bool   `json:"applying"` // it was applying when asked
	Err      string `json:"error,omitempty"`
}

// askPauseAgain is how often AskPause sends its request again.
const askPauseAgain = 5 * time.Second

// AnswerPauses hands each request on SubjectPause to handle, each in its
// own goroutine (a pause answers only once the events under way are
// done), and sends its answer back, until stop is called.
func AnswerPauses(c *Conn, handle func(PauseRequest) PauseAnswer) (stop func(), err error) {
	sub, err := c.NC.Subscribe(SubjectPause, func(m *nats.Msg) {
		var req PauseRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.ID == "" {
			return
		}
		go func() {
			a := handle(req)
			if m.Reply != "" {
				b, _ := json.Marshal(a)
				_ = m.Respond(b)
			}
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", SubjectPause, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// AskPause sends req on SubjectPause and collects the answers until every
// instance in want has answered or wait has passed, sending it again
// every askPauseAgain meanwhile.
func AskPause(ctx context.Context, c *Conn, req PauseRequest, want []string, wait time.Duration) (map[string]PauseAnswer, error) {
	inbox := c.NC.NewInbox()
	sub, err := c.NC.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("ask %s: %w", SubjectPause, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	b, _ := json.Marshal(req)
	if err := c.NC.PublishRequest(SubjectPause, inbox, b); err != nil {
		return nil, fmt.Errorf("ask %s: %w", SubjectPause, err)
	}
	got := map[string]PauseAnswer{}
	deadline := time.Now().Add(wait)
	again := time.Now().Add(askPauseAgain)
	for {
		done := true
		for _, w := range want {
			if _, ok := got[w]; !ok {
				done = false
			}
		}
		if done {
			return got, nil
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return got, nil // the caller tells who did not answer
		}
		m, err := nextWithin(ctx, sub, min(left, time.Until(again)))
		if errors.Is(err, nats.ErrNoResponders) {
			// Nothing subscribes right now (a serve stopping, or one
			// still starting): the server says so at once; wait for the
			// next send rather than ask again in a loop.
			_ = pause(ctx, min(time.Until(deadline), time.Until(again)))
		}
		if err != nil {
			if ctx.Err() == nil && time.Until(deadline) > 0 && !time.Now().Before(again) {
				// Sent again to those that have not answered: one whose
				// consumer subscribed only after the request went out
				// (a serve starting) gets it now; one that is pausing
				// answers the first it got.
				_ = c.NC.PublishRequest(SubjectPause, inbox, b)
				again = time.Now().Add(askPauseAgain)
			}
			continue
		}
		var a PauseAnswer
		if json.Unmarshal(m.Data, &a) == nil && a.Instance != "" {
			got[a.Instance] = a
		}
	}
}

// SubjectBackupRunning is where a running `hookgate backup` answers, for
// as long as it reads the streams, with its PauseRequest: a serve that
// starts during a backup takes the pause before it applies anything (the
// backup's renewals would reach it only with the next one), and an
// operator command that applies events refuses to run.
const SubjectBackupRunning = "hookgate.backup.running"

// SubjectOperatorApplying is where a running operator command that applies
// events (`replay`, `dlq replay`) answers with its OperatorRun: a backup
// that hears one refuses, as the streams it read would hold half a replay.
const SubjectOperatorApplying = "hookgate.operator.applying"

// OperatorRun names a running operator command in its answers on
// SubjectOperatorApplying.
type OperatorRun struct {
	Command  string    `json:"command"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
}

// Announce answers every request on subject with v's JSON until stop is
// called. A subscription the server's permissions deny is an error.
func Announce(c *Conn, subject string, v any) (stop func(), err error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("announce on %s: %w", subject, err)
	}
	return answer(c, subject, func() []byte { return b })
}

// Running asks subject who is announced there (Announce) and decodes each
// answer into a T; none when nothing subscribes, which the server says at
// once. Something subscribed that does not answer within two seconds is
// ErrNoAnswer: the caller cannot tell whether it runs.
func Running[T any](ctx context.Context, c *Conn, subject string) ([]T, error) {
	answers, err := ask(ctx, c, subject, AskOptions{Wait: 2 * time.Second, Quiet: 250 * time.Millisecond})
	if errors.Is(err, ErrNoSubscriber) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []T
	for _, a := range answers {
		var v T
		if json.Unmarshal(a, &v) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}
