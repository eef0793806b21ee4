package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// A stored event whose headers read like a NATS status (a request's
// Status and Description headers with an empty body, which a release
// before stop 29 stored as sent) is a delivery like any other: the
// durable consumer's pull took it for a status of the pull through
// nats.go's Fetch (408 ended the pull, 409 "Consumer Deleted" ended the
// source, 100 was skipped) and never handed it over, so it came back
// after every ack wait, for good, and never applied nor dead-lettered.
// The events after it must come too, in order.
func TestSourceDeliversEventsStoredWithAStatusHeader(t *testing.T) {
	for _, tc := range []struct{ status, desc string }{
		{"408", "Request Timeout"},
		{"404", "No Messages"},
		{"409", "Consumer Deleted"},
		{"100", "Idle Heartbeat"},
		{"503", ""},
	} {
		t.Run(tc.status, func(t *testing.T) {
			env := jstest.Start(t, "")
			ctx := t.Context()
			store := func(key string, h nats.Header, body []byte) {
				t.Helper()
				if h == nil {
					h = nats.Header{}
				}
				h.Set(event.HeaderKey, key)
				h.Set(nats.MsgIdHdr, key)
				if _, err := env.Conn.JS.PublishMsg(ctx, &nats.Msg{Subject: "webhooks.p.a", Header: h, Data: body}); err != nil {
					t.Fatal(err)
				}
			}
			h := nats.Header{}
			h.Set("Status", tc.status)
			if tc.desc != "" {
				h.Set("Description", tc.desc)
			}
			store("p:a:evt:status", h, nil)
			store("p:a:evt:after", nil, []byte(`{"id":"after"}`))

			src, err := jetstream.OpenSource(ctx, env.Conn, jetstream.SourceOptions{MaxAckPending: 64, Prefetch: 16, AckWait: 5 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Stop()
			for _, want := range []string{"p:a:evt:status", "p:a:evt:after"} {
				nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				m, err := src.Next(nctx)
				cancel()
				if err != nil {
					t.Fatalf("waiting for %s: %v", want, err)
				}
				if m.Event.Key != want {
					t.Fatalf("delivered %s, want %s", m.Event.Key, want)
				}
				if got := m.Event.Header.Get("Status"); want == "p:a:evt:status" && got != tc.status {
					t.Errorf("its Status header %q, want %q", got, tc.status)
				}
				if err := m.Delivery.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// Both acknowledged: nothing pending, nothing waiting.
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, err := src.Pending(ctx)
				if err == nil && n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("pending %d, %v after both acks", n, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
