package jetstream

import (
	"context"
	"encoding/json"
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
// instance in want has answered or wait has passed.
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
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
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
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return got, nil // the caller tells who did not answer
		}
		var a PauseAnswer
		if json.Unmarshal(m.Data, &a) == nil && a.Instance != "" {
			got[a.Instance] = a
		}
	}
}
