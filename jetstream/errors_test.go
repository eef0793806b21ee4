package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hookgate/hookgate/consumer"

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

// A GRANTS write or read that failed for no fault of the event is
// consumer.ErrStoreUnavailable (tried again in place, its subject held);
// a refusal the server gave for the message itself is not.
func TestStoreTrouble(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no answer in time", classify("publish grants.p.G-1.t", nats.ErrTimeout), true},
		{"not connected", classify("publish grants.p.G-1.t", nats.ErrReconnectBufExceeded), true},
		{"store stopped writing", fmt.Errorf("%w: %w", ErrUnavailable, ErrStoreWrite), true},
		{"no leader", classify("publish", &js.APIError{Code: 503, ErrorCode: codeClusterNotAvailable}), true},
		{"stream full", classify("publish", &js.APIError{Code: 503, ErrorCode: codeStreamStoreFailed, Description: "maximum bytes exceeded"}), false},
		{"another refusal", classify("publish", &js.APIError{Code: 400, ErrorCode: 10999, Description: "something about the message"}), false},
		{"no stream for the subject", classify("publish", js.ErrNoStreamResponse), false},
		{"no responders", classify("publish", nats.ErrNoResponders), false},
		{"a client-side error", classify("publish", nats.ErrBadSubject), false},
		{"no placement", classify("publish", &js.APIError{Code: 400, ErrorCode: codeClusterNoPeers}), false},
		{"stopped", classify("publish", context.Canceled), false},
		{"nil", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := storeTrouble(c.err)
			if errors.Is(got, consumer.ErrStoreUnavailable) != c.want {
				t.Fatalf("storeTrouble(%v) = %v: ErrStoreUnavailable %v, want %v", c.err, got, !c.want, c.want)
			}
			if c.err != nil && !errors.Is(got, c.err) {
				t.Fatalf("storeTrouble(%v) = %v lost the error it wraps", c.err, got)
			}
		})
	}
}

// The cluster's "no suitable peers" answer is told apart from silence.
func TestNoPeers(t *testing.T) {
	noPeers := classify("update stream WEBHOOKS", &js.APIError{Code: 400, ErrorCode: codeClusterNoPeers, Description: "no suitable peers for placement"})
	if !NoPeers(noPeers) || !NotAnswering(noPeers) {
		t.Fatalf("NoPeers(%v) = %v, NotAnswering %v: want both (tried again, said as a placement problem)", noPeers, NoPeers(noPeers), NotAnswering(noPeers))
	}
	if timeout := classify("update stream WEBHOOKS", nats.ErrTimeout); NoPeers(timeout) {
		t.Fatalf("NoPeers(%v) = true", timeout)
	}
}

// nats.go's refusal to buffer while reconnecting reads as what it is.
func TestAsNotConnected(t *testing.T) {
	got := asNotConnected(nats.ErrReconnectBufExceeded)
	if !errors.Is(got, ErrNotConnected) || !errors.Is(got, nats.ErrReconnectBufExceeded) || got.Error() != ErrNotConnected.Error() {
		t.Fatalf("asNotConnected(ErrReconnectBufExceeded) = %q: want %q, wrapping both", got, ErrNotConnected)
	}
	if other := errors.New("x"); asNotConnected(other) != other || asNotConnected(nil) != nil {
		t.Fatal("asNotConnected changed an error it has no word for")
	}
}
