package jetstream_test

import (
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// --from-seq with --since selects by both; a selection that ends on
// skipped messages (or holds none) ends there, as --since alone does.
// (It used to wait 2 s for more and fail as ErrUnavailable.)
func TestReadFromSeqWithSince(t *testing.T) {
	env := jstest.Start(t, "")
	for _, k := range []string{"p:a:evt:1", "p:a:evt:2", "p:a:evt:3"} {
		if _, err := env.Conn.JS.PublishMsg(t.Context(), &nats.Msg{Subject: "webhooks.p.a", Header: nats.Header{nats.MsgIdHdr: {k}}, Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(r jetstream.Range) []uint64 {
		t.Helper()
		var seqs []uint64
		err := jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, r, func(m jetstream.StoredMsg, _ uint64) error {
			seqs = append(seqs, m.Seq)
			return nil
		})
		if err != nil {
			t.Fatalf("Read(%+v): %v", r, err)
		}
		return seqs
	}
	later := time.Now().Add(time.Hour) // after every stored event
	if got := read(jetstream.Range{Since: later}); len(got) != 0 {
		t.Fatalf("since alone: %v, want none", got)
	}
	if got := read(jetstream.Range{FromSeq: 1, Since: later}); len(got) != 0 {
		t.Fatalf("from-seq 1 and since: %v, want none", got)
	}
	if got := read(jetstream.Range{FromSeq: 2, Since: time.Now().Add(-time.Hour)}); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("from-seq 2 and since an hour ago: %v, want [2 3]", got)
	}
}
