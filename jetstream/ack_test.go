package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// natsGoPubAck decodes an answer the way nats.go 1.55's jetstream
// publishMsg does (publish.go), for comparison.
func natsGoPubAck(data []byte) (pubAck, error) {
	var resp struct {
		Type  string       `json:"type"`
		Error *js.APIError `json:"error,omitempty"`
		*js.PubAck
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return pubAck{}, js.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return pubAck{}, resp.Error
	}
	if resp.PubAck == nil || resp.Stream == "" {
		return pubAck{}, js.ErrInvalidJSAck
	}
	return pubAck{Stream: resp.Stream, Seq: resp.Sequence, Duplicate: resp.Duplicate}, nil
}

func FuzzParsePubAck(f *testing.F) {
	for _, s := range []string{
		`{"stream":"WEBHOOKS","seq":12}`,
		`{"stream":"WEBHOOKS","seq":12,"duplicate": true}`,
		`{"stream":"W","domain":"hub","seq":18446744073709551615}`,
		`{"stream":"W","seq":18446744073709551616}`,
		`{"stream":"W","seq":007}`,
		`{"stream":"W","seq":1e3}`,
		`{"stream":"W","seq":-1}`,
		`{"stream":"W","seq":1,"batch":"b","count":2}`,
		`{"stream":"W","seq":1,"val":"5"}`,
		`{"stream":"W","seq":1,"duplicate":false,"duplicate":true}`,
		`{"stream":"W\u0041","seq":1}`,
		`{"Stream":"W","SEQ":1}`,
		`{"stream":"","seq":1}`,
		`{"stream":"W","seq":1,}`,
		`{"stream":"W","seq":1} x`,
		` { "stream" : "W" , "seq" : 2 , "duplicate" : null } `,
		`{"error":{"code":503,"err_code":10077,"description":"maximum bytes exceeded"},"stream":"W"}`,
		`{"type":"io.nats.jetstream.api.v1.pub_ack","stream":"W","seq":3}`,
		`null`, ``, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parsePubAck(data)
		want, wantErr := natsGoPubAck(data)
		if got != want {
			t.Fatalf("%q: got %+v, nats.go %+v", data, got, want)
		}
		var apiErr, wantAPIErr *js.APIError
		switch {
		case wantErr == nil:
			if err != nil {
				t.Fatalf("%q: err %v, nats.go none", data, err)
			}
		case errors.As(wantErr, &wantAPIErr):
			if !errors.As(err, &apiErr) || *apiErr != *wantAPIErr {
				t.Fatalf("%q: err %v, nats.go %v", data, err, wantErr)
			}
		case !errors.Is(err, wantErr):
			t.Fatalf("%q: err %v, nats.go %v", data, err, wantErr)
		}
	})
}

// The scanner is worth having only if the server's real answers take it.
func TestServerAnswersTakeTheFastPath(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	ctx := context.Background()
	send := func(h nats.Header) []byte {
		t.Helper()
		resp, err := c.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: "webhooks.test.default", Header: h, Data: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Data
	}
	id := func() nats.Header { return nats.Header{js.MsgIDHeader: []string{"fast-path"}} }
	for _, tc := range []struct {
		name   string
		answer []byte
		want   pubAck
	}{
		{"stored", send(id()), pubAck{Stream: StreamWebhooks, Seq: 1}},
		{"duplicate", send(id()), pubAck{Stream: StreamWebhooks, Seq: 1, Duplicate: true}},
		{"no id", send(nil), pubAck{Stream: StreamWebhooks, Seq: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := scanPubAck(tc.answer)
			if !ok || got != tc.want {
				t.Fatalf("scanPubAck(%s) = %+v, %v; want %+v, true", tc.answer, got, ok, tc.want)
			}
		})
	}
	// An error answer keeps its API error code for classify.
	h := nats.Header{js.ExpectedLastSeqHeader: []string{"99"}}
	resp, err := c.NC.RequestMsgWithContext(ctx, &nats.Msg{Subject: "webhooks.test.default", Header: h, Data: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parsePubAck(resp.Data); apiCode(err) != 10071 {
		t.Fatalf("error answer %s: got %v (code %d), want code 10071", resp.Data, err, apiCode(err))
	}
}

// A write whose answer never comes (lost in a leader change) must end,
// even when the caller's ctx has no deadline: the consumer passes such
// contexts, and a hang there stalls its lane for good.
func TestWritesWithoutDeadlineEnd(t *testing.T) {
	c, _ := silentEnv(t)
	const bound = 300 * time.Millisecond
	marks := &Watermarks{nc: c.NC, pre: "silent.marks.", timeout: bound}
	applied := &AppliedKeys{nc: c.NC, pre: "silent.applied.", timeout: bound}
	pub := &Publisher{nc: c.NC, timeout: bound}
	marks.getPre = "silent.get."
	writes := map[string]func(context.Context) error{
		"Watermarks.Get": func(ctx context.Context) error {
			_, _, err := marks.Get(ctx, "p.a.s")
			return err
		},
		"Watermarks.Put": func(ctx context.Context) error {
			_, err := marks.Put(ctx, "p.a.s", consumer.Mark{At: time.Unix(1, 0).UTC()}, 3)
			return err
		},
		"AppliedKeys.Remember": func(ctx context.Context) error { return applied.Remember(ctx, "p:a:evt:1") },
		"Publisher.Publish (deadline on the message)": func(ctx context.Context) error {
			_, err := pub.Publish(ctx, Message{Subject: "silent.webhooks", Key: "k", Deadline: time.Now().Add(2 * bound)})
			return err
		},
	}
	// Two kinds of ctx without a deadline take two paths in storeMsg.
	cancellable, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for ctxName, ctx := range map[string]context.Context{"never ends": context.WithoutCancel(cancellable), "cancellable": cancellable} {
		for name, write := range writes {
			t.Run(ctxName+"/"+name, func(t *testing.T) {
				endsUnavailable(t, "the write was still waiting for an answer after 30s", func() error { return write(ctx) })
			})
		}
	}
}

// status asked while a stream has no leader (a node just died) must not
// wait for the CLI's 10 minutes: each attempt is bounded and retried, then
// it fails as unavailable (it hung for 10 minutes; found by review).
func TestStatusWhileJetStreamDoesNotAnswerEnds(t *testing.T) {
	c, sub := silentEnv(t)
	silent, err := js.NewWithAPIPrefix(c.NC, "silent.api")
	if err != nil {
		t.Fatal(err)
	}
	attempts, wait := statusAttempts, statusAttemptWait
	statusAttempts, statusAttemptWait = 2, 300*time.Millisecond
	t.Cleanup(func() { statusAttempts, statusAttemptWait = attempts, wait })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // the CLI's
	defer cancel()
	endsUnavailable(t, "status still waiting after 30 s", func() error {
		_, err := ReadStatus(ctx, &Conn{NC: c.NC, JS: silent}, StatusOptions{Horizon: time.Hour})
		return err
	})
	if n, _, _ := sub.Pending(); n < 2 {
		t.Fatalf("%d requests reached the silent API; want one per attempt at least", n)
	}
}

// silentEnv is a running server where requests to silent.> are received
// and never answered: a stream whose answer was lost, or that has no
// leader.
func silentEnv(t *testing.T) (*Conn, *nats.Subscription) {
	t.Helper()
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	sub, err := c.NC.SubscribeSync("silent.>")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c, sub
}
