package jetstream

import (
	"testing"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Provisioning waits out a cluster that is still forming (a replica's
// server not online yet: 10005, seen in CI as a serve that exited at
// start) or electing, and gives up at once on a refusal.
func TestTransientProvisionAnswers(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nats.ErrTimeout, true},
		{&js.APIError{Code: 400, ErrorCode: codeClusterNoPeers, Description: "no suitable peers for placement, peer offline"}, true},
		{&js.APIError{Code: 503, ErrorCode: codeClusterNotAvailable}, true},
		{&js.APIError{Code: 500, ErrorCode: codeClusterNotLeader}, true},
		{&js.APIError{Code: 400, ErrorCode: 10058}, false}, // stream name in use with a different config
		{&js.APIError{Code: 400, ErrorCode: codeWrongLastSequence}, false},
	} {
		if got := transient(classify("provision", c.err)); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
