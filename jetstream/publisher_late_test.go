package jetstream

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/nats-io/nats.go"
)

// delayProxy relays TCP between a NATS client and a server; once armed,
// the next server-to-client chunk containing match (any chunk without a
// match: on an idle connection, the answer to the next request) is held
// back for wait, and hit is set.
type delayProxy struct {
	ln    net.Listener
	armed atomic.Bool
	hit   atomic.Bool
	match []byte
	wait  time.Duration
}

func newDelayProxy(t *testing.T, target string, wait time.Duration) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{ln: ln, wait: wait}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				return
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						if p.armed.Load() && bytes.Contains(buf[:n], p.match) && p.armed.Swap(false) {
							p.hit.Store(true)
							time.Sleep(p.wait)
						}
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// An attempt whose ack comes after its timeout (the server stored the
// event) is retried with the same Nats-Msg-Id and answered "duplicate":
// that is this call's own write, so the event is new (it was answered and
// audited "duplicate", and no "accepted" record ever existed for it). A
// real resend whose first attempt is as late stays a duplicate.
// listeningEmbedded starts an embedded server in dir that also listens on
// a loopback port (token "tok"), so a test can reach it through a proxy;
// it returns that address. Stopped at cleanup.
func listeningEmbedded(t *testing.T, dir string) (string, *Embedded) {
	t.Helper()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	e, err := StartEmbedded(EmbeddedOptions{DataDir: dir, Listen: addr, Token: "tok", MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return addr, e
}

func TestPublishLateAckIsNotADuplicate(t *testing.T) {
	addr, _ := listeningEmbedded(t, t.TempDir())
	px := newDelayProxy(t, addr, 400*time.Millisecond)
	c, err := Connect(ConnectOptions{Name: "test", URL: "nats://" + px.ln.Addr().String(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := Provision(t.Context(), c.JS, testStreams()); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(c, 150*time.Millisecond) // each attempt waits 150 ms for its ack
	send := func(receivedAt string) PublishResult {
		t.Helper()
		m := msg("p:default:evt:late")
		m.Header = nats.Header{event.HeaderReceivedAt: {receivedAt}}
		m.TellOwnWrite = true
		if err := c.NC.Flush(); err != nil { // the connection is idle: the next chunk is the ack
			t.Fatal(err)
		}
		px.armed.Store(true)
		res, err := pub.Publish(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		if px.armed.Load() {
			t.Fatal("no answer was held back: the fault did not hit the publish")
		}
		return res
	}
	if res := send("2026-12-01T10:00:00.000000001Z"); res.Duplicate || res.Seq != 1 {
		t.Fatalf("first delivery, late ack: %+v, want new at seq 1", res)
	}
	if res := send("2026-12-01T10:00:05.000000002Z"); !res.Duplicate || res.Seq != 1 {
		t.Fatalf("a resend, late ack: %+v, want a duplicate of seq 1", res)
	}
	if n := countSubject(t, c, "webhooks.test.default"); n != 1 {
		t.Fatalf("WEBHOOKS holds %d, want 1", n)
	}
}
