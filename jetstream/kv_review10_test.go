package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// retryProvision while the store does not answer: a stop (the caller's
// ctx cancelled, a SIGTERM during serve's start) is reported as such, so
// serve stops cleanly instead of failing with the last attempt's error
// (review 10); a deadline, the caller's or its own 30 s, still reports the
// store's trouble (the last attempt), not a bare "context deadline
// exceeded".
func TestRetryProvisionStopAndDeadline(t *testing.T) {
	unanswered := fmt.Errorf("look up stream WEBHOOKS: %w: no responders", ErrUnavailable)
	op := func(context.Context) error { return unanswered }
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(3*time.Second, cancel)
		err := retryProvision(ctx, op)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled while retrying: %v, want context.Canceled", err)
		}

		dctx, dcancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer dcancel()
		err = retryProvision(dctx, op)
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("caller's deadline while retrying: %v, want the last attempt's unavailable error", err)
		}

		err = retryProvision(t.Context(), op)
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("own 30 s deadline: %v, want the last attempt's unavailable error", err)
		}
	})
}
