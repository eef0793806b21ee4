package jetstream

import (
	"errors"
	"testing"
)

// Deleting a message that is not there (a letter another operator command
// removed meanwhile) is ErrNotFound, not ErrUnavailable: `dlq replay`
// racing a `replay` reported "jetstream unavailable ... sequence 35 not
// found" for a letter already removed (review BH), and the callers that
// take ErrNotFound as done never saw it.
func TestDeleteMsgOfAMissingSequenceIsNotFound(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer func() { c.Close(); e.Shutdown() }()
	ack, err := c.JS.Publish(t.Context(), "dlq.p.a", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := DeleteMsg(t.Context(), c, StreamDLQ, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{ack.Sequence, ack.Sequence + 100} {
		err := DeleteMsg(t.Context(), c, StreamDLQ, seq)
		if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
			t.Errorf("delete of missing sequence %d: %v; want ErrNotFound", seq, err)
		}
	}
}
