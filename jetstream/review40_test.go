package jetstream

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// noLeaderOnce returns c with its JetStream API behind a relay that
// answers the first request on API subject api the way a member of a
// clustered stream's group answers while the group has no leader
// (nats-server jsMsgDeleteRequest: isGroupLeaderless ->
// NewJSClusterNotAvailError, 503 / 10008), and passes every other request
// on to the server.
func noLeaderOnce(t *testing.T, c *Conn, api string) (*Conn, *atomic.Int32) {
	t.Helper()
	return noLeaderOnceThen(t, c, api, func() {})
}

// noLeaderOnceThen is noLeaderOnce calling meanwhile before it answers.
func noLeaderOnceThen(t *testing.T, c *Conn, api string, meanwhile func()) (*Conn, *atomic.Int32) {
	t.Helper()
	answered := new(atomic.Int32)
	relay := relayAPI(t, c, func(sub string, m *nats.Msg) bool {
		if sub != api || !answered.CompareAndSwap(0, 1) {
			return false
		}
		meanwhile()
		_ = m.Respond([]byte(`{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response","error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`))
		return true
	})
	return relay, answered
}

// Review 40: RemoveMsg is to ride out a stream leader's election (README:
// "one answered 'no leader' sooner" is asked again). A clustered stream's
// members answer a delete during the election with 10008 ("JetStream
// system temporarily unavailable"); nats.go's DeleteMsg hands that back as
// ErrMsgDeleteUnsuccessful with the server's text, which RemoveMsg takes
// for "a refusal the server gave" and returns at once: dlq remove / dlq
// replay fail during exactly the election they were to ride out.
func TestReview40RemoveMsgRidesOutANoLeaderAnswer(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	ack, err := c.JS.Publish(t.Context(), "dlq.p.a", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	lossy, answered := noLeaderOnce(t, c, "STREAM.MSG.DELETE."+StreamDLQ)
	err = returnsWithin(t, 30*time.Second, func() error { return RemoveMsg(t.Context(), lossy, StreamDLQ, ack.Sequence) })
	if answered.Load() != 1 {
		t.Fatalf("the relay answered 'no leader' %d times, want 1: the test did not reach the request it is about", answered.Load())
	}
	if err != nil {
		t.Fatalf("remove whose first answer was the election's 'no leader' (10008): %v; want it asked again and removed", err)
	}
	if _, err := GetMsg(t.Context(), c, StreamDLQ, ack.Sequence); !errors.Is(err, ErrNotFound) {
		t.Fatalf("letter %d after RemoveMsg: %v, want it gone", ack.Sequence, err)
	}
}

// Review 40: "not found on a later attempt counts as removed" also when
// no earlier attempt can have acted: a letter never there, or one another
// command removed meanwhile, was reported removed by this one (and
// audited dlq-removed twice). Now a letter not there is not found at
// once, and after an attempt answered "no leader" (which did nothing) a
// letter another command removed meanwhile is not found either.
func TestReview40RemoveMsgOfALetterNeverThereAfterAnUnsentAttempt(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	ack, err := c.JS.Publish(t.Context(), "dlq.p.a", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	lossy, _ := lossyAPI(t, c, "STREAM.MSG.DELETE."+StreamDLQ)
	err = returnsWithin(t, 30*time.Second, func() error { return RemoveMsg(t.Context(), lossy, StreamDLQ, ack.Sequence+10) })
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove of letter %d, never in DLQ: %v; want ErrNotFound, not a removal", ack.Sequence+10, err)
	}
	// Another command removes the letter while this one's first delete is
	// answered "no leader".
	relay, answered := noLeaderOnceThen(t, c, "STREAM.MSG.DELETE."+StreamDLQ, func() {
		if err := DeleteMsg(t.Context(), c, StreamDLQ, ack.Sequence); err != nil {
			t.Error(err)
		}
	})
	err = returnsWithin(t, 30*time.Second, func() error { return RemoveMsg(t.Context(), relay, StreamDLQ, ack.Sequence) })
	if answered.Load() != 1 {
		t.Fatalf("the relay answered 'no leader' %d times, want 1: the test did not reach the request it is about", answered.Load())
	}
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove of a letter another command removed while this one's delete was answered 'no leader': %v; want ErrNotFound, not a removal", err)
	}
}
