package main

import (
	"context"
	"errors"
	"io"
	"testing"
)

// -pace takes "inf" (and "NaN"): o.Pace < 0 is false for both. With
// +Inf the sustained run's rate is +Inf, every slot lands at the load's
// start (closed loop, not paced), and E2EResult.Offered = +Inf makes
// json.Marshal fail in WriteJSON after the whole run. NaN silently drops
// the configuration. Both should be usage errors, like -pace -1.
func TestReviewPPaceNotFinite(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing may run: the flags must be refused first
	for _, pace := range []string{"inf", "NaN"} {
		err := runBench(ctx, []string{
			"-pace", pace, "-hookgate", "/nonexistent/hookgate", "-out", "", "-work", t.TempDir(),
			"-rounds", "0", "-keys", "0", "-profile=false",
		}, io.Discard, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("-pace %s: got %v, want a usage error", pace, err)
		}
	}
}
