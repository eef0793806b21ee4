package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

func testStreams() StreamsConfig {
	return StreamsConfig{
		Replicas:    1,
		Horizon:     time.Hour,
		DedupWindow: 2 * time.Minute,
		MaxMsgSize:  2 << 20,
		Webhooks:    Limits{MaxAge: 24 * time.Hour, MaxBytes: 8 << 30},
		Grants:      Limits{MaxAge: 24 * time.Hour, MaxBytes: 64 << 20},
		DLQ:         Limits{MaxAge: 24 * time.Hour, MaxBytes: 64 << 20},
		Audit:       Limits{MaxAge: 24 * time.Hour, MaxBytes: 64 << 20},
	}
}

// startEmbedded runs an embedded server in dir with the streams provisioned.
func startEmbedded(t testing.TB, dir string, sc StreamsConfig) (*Embedded, *Conn) {
	t.Helper()
	e, err := StartEmbedded(EmbeddedOptions{DataDir: dir, MaxPayload: 4 << 20})
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	c, err := Connect(ConnectOptions{Name: "test", Embedded: e})
	if err != nil {
		e.Shutdown()
		t.Fatalf("connect: %v", err)
	}
	if err := Provision(context.Background(), c.JS, sc); err != nil {
		c.Close()
		e.Shutdown()
		t.Fatalf("provision: %v", err)
	}
	return e, c
}

func msg(key string) Message {
	h := nats.Header{}
	h.Set("Hookgate-Key", key)
	return Message{Subject: "webhooks.test.default", Key: key, Header: h, Body: []byte(`{"id":"` + key + `"}`)}
}

func countSubject(t testing.TB, c *Conn, subj string) uint64 {
	t.Helper()
	s, err := c.JS.Stream(context.Background(), StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), js.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range info.State.Subjects {
		n += v
	}
	return n
}

func TestPublishAcceptsOnceThenDuplicate(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	p := NewPublisher(c, 5*time.Second)
	ctx := t.Context()

	first, err := p.Publish(ctx, msg("test:default:evt:1"))
	if err != nil || first.Duplicate || first.Seq == 0 {
		t.Fatalf("first publish = %+v, %v; want stored", first, err)
	}
	second, err := p.Publish(ctx, msg("test:default:evt:1"))
	if err != nil || !second.Duplicate {
		t.Fatalf("second publish = %+v, %v; want duplicate", second, err)
	}
	other, err := p.Publish(ctx, msg("test:default:evt:2"))
	if err != nil || other.Duplicate {
		t.Fatalf("other key = %+v, %v; want stored", other, err)
	}
	if n := countSubject(t, c, "webhooks.>"); n != 2 {
		t.Fatalf("events stored = %d, want 2", n)
	}
}

func TestPublishConcurrentSameKeyStoresOne(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	p := NewPublisher(c, 10*time.Second)
	const n = 200
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		stored, dup, bad int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Publish(t.Context(), msg("test:default:evt:same"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				bad++
				t.Errorf("publish: %v", err)
			case r.Duplicate:
				dup++
			default:
				stored++
			}
		}()
	}
	wg.Wait()
	if stored != 1 || dup != n-1 || bad != 0 {
		t.Fatalf("stored=%d duplicate=%d failed=%d; want 1/%d/0", stored, dup, bad, n-1)
	}
	if got := countSubject(t, c, "webhooks.>"); got != 1 {
		t.Fatalf("events stored = %d, want 1", got)
	}
}

// A key stays a duplicate across a restart: the server rebuilds the
// duplicate window from the stream.
func TestDuplicateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e, c := startEmbedded(t, dir, testStreams())
	p := NewPublisher(c, 5*time.Second)
	r, err := p.Publish(t.Context(), msg("test:default:evt:kept"))
	if err != nil || r.Duplicate {
		t.Fatalf("publish = %+v, %v", r, err)
	}
	c.Close()
	e.Shutdown()

	e, c = startEmbedded(t, dir, testStreams())
	defer e.Shutdown()
	defer c.Close()
	p = NewPublisher(c, 5*time.Second)
	again, err := p.Publish(t.Context(), msg("test:default:evt:kept"))
	if err != nil || !again.Duplicate || again.Seq != r.Seq {
		t.Fatalf("after restart = %+v, %v; want duplicate of seq %d", again, err, r.Seq)
	}
	fresh, err := p.Publish(t.Context(), msg("test:default:evt:fresh"))
	if err != nil || fresh.Duplicate {
		t.Fatalf("fresh key = %+v, %v; want stored", fresh, err)
	}
}

// WEBHOOKS refuses deletes and purges: either would make the server forget
// a key at its next restart.
func TestWebhooksDeniesDelete(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	r, err := NewPublisher(c, 5*time.Second).Publish(t.Context(), msg("test:default:evt:d"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.JS.Stream(t.Context(), StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(t.Context(), r.Seq); err == nil {
		t.Fatal("delete from WEBHOOKS succeeded; want refused")
	}
	if err := s.Purge(t.Context()); err == nil {
		t.Fatal("purge of WEBHOOKS succeeded; want refused")
	}
}

// Past the horizon a key is new again: its claim expired by TTL.
func TestClaimExpiresAfterHorizon(t *testing.T) {
	sc := testStreams()
	sc.Horizon, sc.DedupWindow = time.Second, time.Second
	e, c := startEmbedded(t, t.TempDir(), sc)
	defer e.Shutdown()
	defer c.Close()
	p := NewPublisher(c, 5*time.Second)
	if r, err := p.Publish(t.Context(), msg("test:default:evt:x")); err != nil || r.Duplicate {
		t.Fatalf("publish = %+v, %v", r, err)
	}
	if r, err := p.Publish(t.Context(), msg("test:default:evt:x")); err != nil || !r.Duplicate {
		t.Fatalf("inside horizon = %+v, %v; want duplicate", r, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := p.Publish(t.Context(), msg("test:default:evt:x"))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Duplicate {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("key still a duplicate 20s after a 1s horizon")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := countSubject(t, c, "webhooks.>"); n != 2 {
		t.Fatalf("events = %d, want 2 (once per horizon)", n)
	}
}

func TestPublishFullStreamIsStreamFull(t *testing.T) {
	sc := testStreams()
	sc.Webhooks.MaxBytes = 4096
	e, c := startEmbedded(t, t.TempDir(), sc)
	defer e.Shutdown()
	defer c.Close()
	p := NewPublisher(c, 5*time.Second)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = p.Publish(t.Context(), msg(fmt.Sprintf("test:default:evt:%d", i)))
	}
	if !errors.Is(err, ErrStreamFull) {
		t.Fatalf("err = %v, want ErrStreamFull", err)
	}
	// What an operator reads in the log: the key to raise, nats.go's
	// prefix once (a resource audit, stop 39: "nats: nats: API error",
	// no key named).
	if msg := err.Error(); !strings.Contains(msg, "retention.webhooks.max_bytes") || strings.Count(msg, "nats: ") != 1 {
		t.Fatalf("err = %q: want it to name retention.webhooks.max_bytes and say nats: once", msg)
	}
}

func TestPublishUnavailableWhenServerGone(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer c.Close()
	p := NewPublisher(c, 500*time.Millisecond)
	e.Shutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := p.Publish(ctx, msg("test:default:evt:gone"))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

// A Message's Deadline bounds Publish and its retries when ctx never ends
// (the gateway's way: no timer per request for the overall limit).
func TestPublishDeadlineBoundsRetries(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	p := NewPublisher(c, 5*time.Second)
	// No stream takes this subject: "no responders", retried as a leader
	// election would be.
	m := msg("test:default:evt:deadline")
	m.Subject = "nostream.test"
	m.Deadline = time.Now().Add(300 * time.Millisecond)
	endsUnavailable(t, "Publish kept retrying past its Deadline", func() error {
		_, err := p.Publish(context.Background(), m)
		return err
	})
}

// endsUnavailable runs write and fails the test unless it returns
// ErrUnavailable; hang says what it means that it is still running after
// 30 s (the tests' hang detector, not a timing assertion).
func endsUnavailable(t *testing.T, hang string, write func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- write() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal(hang)
	}
}

// BenchmarkPublishSync compares the embedded server's two durability
// modes in one run: sync interval (fsync every 2 min; acked writes survive
// a process kill) and sync always (fsync each write; also power loss).
func BenchmarkPublishSync(b *testing.B) {
	for _, always := range []bool{false, true} {
		name := "interval"
		if always {
			name = "always"
		}
		b.Run(name, func(b *testing.B) {
			e, err := StartEmbedded(EmbeddedOptions{DataDir: b.TempDir(), MaxPayload: 4 << 20, SyncAlways: always})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Shutdown()
			c, err := Connect(ConnectOptions{Name: "bench", Embedded: e})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := Provision(context.Background(), c.JS, testStreams()); err != nil {
				b.Fatal(err)
			}
			p := NewPublisher(c, 5*time.Second)
			body := make([]byte, 1024)
			var i atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m := msg(fmt.Sprintf("bench:default:evt:%d", i.Add(1)))
					m.Body = body
					if _, err := p.Publish(context.Background(), m); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkPublishPlain is the reference: a bare JetStream publish with
// Nats-Msg-Id, without the Publisher's retry loop.
func BenchmarkPublishPlain(b *testing.B) {
	e, c := startEmbedded(b, b.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	body := make([]byte, 1024)
	var i atomic.Int64
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m := nats.NewMsg("webhooks.test.default")
			m.Data = body
			m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("bench:default:evt:%d", i.Add(1)))
			if _, err := c.JS.PublishMsg(context.Background(), m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The key stays a duplicate past dedup.window: WEBHOOKS' window is the
// horizon. The DLQ stream (window = dedup.window = 1s) serves as the clock:
// once it accepts the same id again, a window of dedup.window has passed.
func TestDuplicateOutlivesDedupWindow(t *testing.T) {
	sc := testStreams()
	sc.Horizon, sc.DedupWindow = time.Hour, time.Second
	e, c := startEmbedded(t, t.TempDir(), sc)
	defer e.Shutdown()
	defer c.Close()
	p := NewPublisher(c, 5*time.Second)
	if r, err := p.Publish(t.Context(), msg("test:default:evt:long")); err != nil || r.Duplicate {
		t.Fatalf("publish = %+v, %v", r, err)
	}
	clock := nats.NewMsg("dlq.test.default")
	clock.Header.Set(nats.MsgIdHdr, "clock")
	if _, err := c.JS.PublishMsg(t.Context(), clock); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ack, err := c.JS.PublishMsg(t.Context(), clock)
		if err != nil {
			t.Fatal(err)
		}
		if !ack.Duplicate {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("DLQ still deduplicates after 20s with a 1s window")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r, err := p.Publish(t.Context(), msg("test:default:evt:long")); err != nil || !r.Duplicate {
		t.Fatalf("after dedup.window: %+v, %v; want still a duplicate (horizon 1h)", r, err)
	}
}

// tcpServer is an embedded server listening on a loopback port with a
// token, its streams provisioned, and a client connected to it over TCP,
// which reconnects when the server comes back on the same options.
// shutdown and restart may run on any goroutine; cleanup shuts it down.
type tcpServer struct {
	opts EmbeddedOptions
	c    *Conn
	mu   sync.Mutex
	e    *Embedded // nil while shut down
}

func startTCPServer(t *testing.T) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &tcpServer{opts: EmbeddedOptions{DataDir: t.TempDir(), Listen: addr, Token: "tok", MaxPayload: 4 << 20}}
	if err := s.restart(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.shutdown)
	c, err := Connect(ConnectOptions{Name: "consumer", URL: "nats://" + addr, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := Provision(t.Context(), c.JS, testStreams()); err != nil {
		t.Fatal(err)
	}
	s.c = c
	return s
}

// shutdown stops the server; a no-op when it is stopped.
func (s *tcpServer) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		s.e.Shutdown()
		s.e = nil
	}
}

// restart starts the server again on the same data dir and port.
func (s *tcpServer) restart() error {
	e, err := StartEmbedded(s.opts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
	return nil
}
