package jetstream_test

import (
	"fmt"
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

// The reader's consumer lost mid-read (deleted here; in a cluster, gone
// with the stream leader's node) is re-created from the next sequence:
// every message is read once, in order, and no consumer is left behind.
func TestReadRecreatesItsLostConsumer(t *testing.T) {
	env := jstest.Start(t, "")
	const n = 700
	for i := range n {
		msg := &nats.Msg{Subject: "webhooks.p.a", Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("p:a:evt:%d", i)}}, Data: []byte("{}")}
		if _, err := env.Conn.JS.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
	readers := func() []string {
		t.Helper()
		s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamWebhooks)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for name := range s.ConsumerNames(t.Context()).Name() {
			names = append(names, name)
		}
		return names
	}
	var seqs []uint64
	deleted := 0
	err := jetstream.Read(t.Context(), env.Conn, jetstream.StreamWebhooks, jetstream.Range{}, func(m jetstream.StoredMsg, total uint64) error {
		if total != n {
			t.Errorf("total %d, want %d", total, n)
		}
		seqs = append(seqs, m.Seq)
		if len(seqs) == 100 || len(seqs) == 400 {
			for _, name := range readers() {
				if err := env.Conn.JS.DeleteConsumer(t.Context(), jetstream.StreamWebhooks, name); err != nil {
					t.Fatal(err)
				}
				deleted++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if deleted < 2 {
		t.Fatalf("deleted %d consumers mid-read, want one each time", deleted)
	}
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("read %d messages (first %v), want seqs 1..%d once each in order", len(seqs), seqs[:min(len(seqs), 5)], n)
	}
	if left := readers(); len(left) != 0 {
		t.Fatalf("consumers left after the read: %v", left)
	}
}
