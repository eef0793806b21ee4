package jetstream

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func reviewRPublishTCP(t *testing.T, c *Conn, n int) {
	t.Helper()
	for range n {
		msg := &nats.Msg{Subject: "webhooks.p.a", Header: nats.Header{nats.MsgIdHdr: {nats.NewInbox()}}, Data: []byte("{}")}
		if _, err := c.JS.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
}

// The server restarted mid-read (the reader's in-memory consumer is gone
// with it): every message once, in order, no consumer left.
func TestReviewRServerRestartMidRead(t *testing.T) {
	s := startTCPServer(t)
	const n = 700
	reviewRPublishTCP(t, s.c, n)
	var got []uint64
	err := Read(t.Context(), s.c, StreamWebhooks, Range{}, func(m StoredMsg, _ uint64) error {
		got = append(got, m.Seq)
		if len(got) == 100 || len(got) == 400 {
			s.shutdown()
			deadline := time.Now().Add(30 * time.Second)
			for s.c.NC.Status() == nats.CONNECTED {
				if time.Now().After(deadline) {
					t.Fatal("still connected 30 s after the shutdown")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := s.restart(); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d messages (%v ... %v), want 1..%d once each in order", len(got), got[:min(5, len(got))], got[max(0, len(got)-5):], n)
	}
	st, err := s.c.JS.Stream(t.Context(), StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for name := range st.ConsumerNames(t.Context()).Name() {
		left = append(left, name)
	}
	if len(left) != 0 {
		t.Fatalf("consumers left after the read: %v", left)
	}
}

// A read waiting for a server that is gone returns ctx's error when ctx
// ends (not after readStall).
func TestReviewRServerDownCancel(t *testing.T) {
	s := startTCPServer(t)
	reviewRPublishTCP(t, s.c, 700)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	down := make(chan struct{})
	go func() {
		n := 0
		done <- Read(ctx, s.c, StreamWebhooks, Range{}, func(m StoredMsg, _ uint64) error {
			n++
			if n == 100 {
				s.shutdown()
				close(down)
			}
			return nil
		})
	}()
	<-down
	deadline := time.Now().Add(30 * time.Second)
	for s.c.NC.Status() == nats.CONNECTED {
		if time.Now().After(deadline) {
			t.Fatal("still connected 30 s after the shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Read still running 30 s after ctx was cancelled")
	}
}
