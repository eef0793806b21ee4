package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// Review 41 (commit fd66979: serve acknowledges as already-dead-lettered
// the events its consumer reset brings back whose WEBHOOKS sequence has a
// letter in DLQ, or a dead-lettered record in AUDIT, written since the
// first event above the ack floor was stored).

// review41StoreEvent stores one event in WEBHOOKS as the gateway does and
// returns its sequence.
func review41StoreEvent(t *testing.T, c *jetstream.Conn, key string) uint64 {
	t.Helper()
	h := nats.Header{}
	h.Set(event.HeaderKey, key)
	h.Set("Hookgate-Provider", "grantsgov")
	h.Set("Hookgate-Account", "default")
	h.Set(nats.MsgIdHdr, key)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := c.JS.PublishMsg(ctx, &nats.Msg{Subject: "webhooks.grantsgov.default", Header: h, Data: []byte(`{"id":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// WEBHOOKS deleted and created again (the README's key-index section
// names the case) starts its sequences at 1 again, while DLQ keeps the
// letters of the events of the old stream, with their old
// Hookgate-Stored-Seq. An operator's `dlq replay` of such an old letter
// that fails again re-appends it now (a new letter, this moment's time,
// Hookgate-Stored-Seq = the old sequence), and writes a dead-lettered
// AUDIT record with that sequence. letteredBefore matches by sequence
// alone, never by the event's key: the new stream's event at that
// sequence, never run to the end (stored after the floor, waiting out a
// retry or not yet delivered), is then acknowledged as
// already-dead-lettered after serve's next reset. It has no letter, is
// not applied, and nothing will ever run it: an accepted event lost.
func TestReview41LetteredMatchesTheEventNotJustItsSequence(t *testing.T) {
	env := jstest.Start(t, "")
	c := env.Conn
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The old stream: event old-2 at sequence 2 is dead-lettered.
	review41StoreEvent(t, c, "grantsgov:default:evt:old-1")
	oldSeq := review41StoreEvent(t, c, "grantsgov:default:evt:old-2")
	old, err := jetstream.GetMsg(ctx, c, jetstream.StreamWebhooks, oldSeq)
	if err != nil {
		t.Fatal(err)
	}
	effects := jetstream.NewEffects(c)
	letter, err := effects.DeadLetter(ctx, jetstream.EventFromMsg(old.Header, old.Body, oldSeq), "forward: 400 Bad Request", 1)
	if err != nil {
		t.Fatal(err)
	}

	// WEBHOOKS deleted and created again; new events take sequences 1, 2.
	if err := c.JS.DeleteStream(ctx, jetstream.StreamWebhooks); err != nil {
		t.Fatal(err)
	}
	if err := jetstream.Provision(ctx, c.JS, jstest.Streams()); err != nil {
		t.Fatal(err)
	}
	from := review41StoreEvent(t, c, "grantsgov:default:evt:new-1")
	newSeq := review41StoreEvent(t, c, "grantsgov:default:evt:new-2")
	if newSeq != oldSeq {
		t.Fatalf("the new stream's second event took sequence %d, want %d", newSeq, oldSeq)
	}

	// The operator re-feeds the old letter, and it fails again: dlq
	// replay re-appends it (dlqReplayOne: letterEvent, then the
	// processor's DeadLetter).
	m, err := jetstream.ReadMsg(ctx, c, jetstream.StreamDLQ, letter)
	if err != nil {
		t.Fatal(err)
	}
	refed := letterEvent(m)
	if refed.Seq != oldSeq {
		t.Fatalf("letterEvent: seq %d, want %d", refed.Seq, oldSeq)
	}
	again, err := effects.DeadLetter(ctx, refed, "forward: 400 Bad Request", 1)
	if err != nil {
		t.Fatal(err)
	}
	if again == letter {
		t.Fatal("the re-fed letter was not re-appended")
	}

	// serve starts again; its reset's first event is new-1.
	l := &letteredBefore{}
	l.load(ctx, c, from, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if why := l.of(newSeq); why != "" {
		t.Fatalf("event grantsgov:default:evt:new-2 (WEBHOOKS %d) was never dead-lettered (no letter of its key in DLQ), yet serve would acknowledge it unrun as already-dead-lettered: %q\n"+
			"(the letter %d is of grantsgov:default:evt:old-2 of the deleted stream, whose Hookgate-Stored-Seq %s is the same number)",
			newSeq, why, again, strconv.FormatUint(oldSeq, 10))
	}
}
