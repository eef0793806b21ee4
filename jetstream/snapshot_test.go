package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// TestSnapshotRestoreStream: a snapshot of WEBHOOKS with a consumer part
// acknowledged, restored on another server, has every message (body and
// headers), the consumer with its ack floor, and, once its server starts
// again, the duplicate window (a repeat of a stored id is a duplicate
// there too). A second restore is
// refused as ErrStreamExists; a snapshot cut short is refused by the
// server and leaves no stream; a missing stream is ErrStreamNotFound.
func TestSnapshotRestoreStream(t *testing.T) {
	ctx := t.Context()
	ea, ca := startEmbedded(t, t.TempDir(), testStreams())
	defer ea.Shutdown()
	defer ca.Close()
	pub := NewPublisher(ca, 5*time.Second)
	rnd := rand.New(rand.NewPCG(1, 2))
	const n = 300
	for i := range n {
		m := msg(fmt.Sprintf("k-%d", i))
		// Bodies that do not compress, so the snapshot takes several chunks.
		pad := make([]byte, 1000)
		for j := range pad {
			pad[j] = byte(rnd.Uint32())
		}
		m.Body = fmt.Appendf(nil, `{"id":"k-%d","pad":"%x"}`, i, pad)
		if _, err := pub.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := ca.JS.CreateOrUpdateConsumer(ctx, StreamWebhooks, js.ConsumerConfig{Durable: "apply", AckPolicy: js.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(100, js.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	if acked != 100 {
		t.Fatalf("acked %d of the 100 fetched", acked)
	}

	var snap bytes.Buffer
	info, err := Snapshot(ctx, ca, StreamWebhooks, &snap)
	if err != nil {
		t.Fatal(err)
	}
	if info.Bytes != int64(snap.Len()) || snap.Len() < 128<<10 {
		t.Fatalf("snapshot: %d bytes counted, %d written; want one count, more than one 128 KiB chunk", info.Bytes, snap.Len())
	}
	if _, err := Snapshot(ctx, ca, "NOPE", &bytes.Buffer{}); !errors.Is(err, ErrStreamNotFound) {
		t.Fatalf("snapshot of a missing stream: %v, want ErrStreamNotFound", err)
	}

	dirB := t.TempDir()
	eb, err := StartEmbedded(EmbeddedOptions{DataDir: dirB, MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eb.Shutdown()
	cb, err := Connect(ConnectOptions{Name: "restore", Embedded: eb})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()

	// Cut short: the server refuses it and keeps no stream.
	if err := Restore(ctx, cb, info.Config, info.State, RestoreOptions{Replicas: 1}, bytes.NewReader(snap.Bytes()[:snap.Len()/2])); err == nil {
		t.Fatal("a snapshot cut in half was restored")
	}
	if _, err := cb.JS.Stream(ctx, StreamWebhooks); !errors.Is(err, js.ErrStreamNotFound) {
		t.Fatalf("after the refused restore the stream is there: %v", err)
	}

	if err := Restore(ctx, cb, info.Config, info.State, RestoreOptions{Replicas: 1}, bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	st, err := cb.JS.Stream(ctx, StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	si, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != n || si.State.LastSeq != n {
		t.Fatalf("restored: %d messages, last seq %d; want %d, %d", si.State.Msgs, si.State.LastSeq, n, n)
	}
	for _, seq := range []uint64{1, 150, n} {
		a, err := getSeq(ctx, ca, seq)
		if err != nil {
			t.Fatal(err)
		}
		b, err := getSeq(ctx, cb, seq)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Data, b.Data) || a.Header.Get("Hookgate-Key") != b.Header.Get("Hookgate-Key") || b.Header.Get("Hookgate-Key") == "" {
			t.Errorf("seq %d differs after the restore: %q %v against %q %v", seq, b.Data[:20], b.Header, a.Data[:20], a.Header)
		}
	}
	rc, err := cb.JS.Consumer(ctx, StreamWebhooks, "apply")
	if err != nil {
		t.Fatalf("the consumer was not restored: %v", err)
	}
	ci, err := rc.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.AckFloor.Stream != 100 || ci.NumPending != n-100 {
		t.Fatalf("restored consumer: ack floor %d, %d pending; want 100, %d", ci.AckFloor.Stream, ci.NumPending, n-100)
	}
	if err := Restore(ctx, cb, info.Config, info.State, RestoreOptions{Replicas: 1}, bytes.NewReader(snap.Bytes())); !errors.Is(err, ErrStreamExists) {
		t.Fatalf("restoring over the stream: %v, want ErrStreamExists", err)
	}

	// The server fills a restored stream's duplicate window only when it
	// next starts (nats-server 2.15.2): hookgate restore stops its server
	// before serve starts one.
	cb.Close()
	eb.Shutdown()
	eb, err = StartEmbedded(EmbeddedOptions{DataDir: dirB, MaxPayload: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eb.Shutdown()
	if cb, err = Connect(ConnectOptions{Name: "restarted", Embedded: eb}); err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	res, err := NewPublisher(cb, 5*time.Second).Publish(ctx, msg("k-7"))
	if err != nil || !res.Duplicate || res.Seq != 8 {
		t.Fatalf("a stored id again on the restored stream: %+v, %v; want a duplicate of seq 8", res, err)
	}
}

func getSeq(ctx context.Context, c *Conn, seq uint64) (*js.RawStreamMsg, error) {
	st, err := c.JS.Stream(ctx, StreamWebhooks)
	if err != nil {
		return nil, err
	}
	return st.GetMsg(ctx, seq)
}

// BenchmarkSnapshotRestore: a backup's and a restore's speed on a WEBHOOKS
// of 20 000 events of 1.6 KB, against reading the same stream through
// Read (what replay does) in the same run. Each op is the whole stream.
func BenchmarkSnapshotRestore(b *testing.B) {
	ctx := context.Background()
	ea, ca := startEmbedded(b, b.TempDir(), testStreams())
	defer ea.Shutdown()
	defer ca.Close()
	pub := NewPublisher(ca, 5*time.Second)
	rnd := rand.New(rand.NewPCG(3, 4))
	const n = 20000
	for i := range n {
		m := msg(fmt.Sprintf("bench-%d", i))
		words := make([]byte, 0, 1600)
		for len(words) < 1500 {
			words = fmt.Appendf(words, "%x ", rnd.Uint32()%4096)
		}
		m.Body = fmt.Appendf(nil, `{"id":"bench-%d","grant_id":"G-%d","note":%q}`, i, i%1000, words)
		if _, err := pub.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	st, err := ca.JS.Stream(ctx, StreamWebhooks)
	if err != nil {
		b.Fatal(err)
	}
	si, err := st.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var snap bytes.Buffer
	info, err := Snapshot(ctx, ca, StreamWebhooks, &snap)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read-reference", func(b *testing.B) {
		b.SetBytes(int64(si.State.Bytes))
		for range b.N {
			got := 0
			if err := Read(ctx, ca, StreamWebhooks, Range{}, func(StoredMsg, uint64) error { got++; return nil }); err != nil || got != n {
				b.Fatalf("read %d of %d: %v", got, n, err)
			}
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		b.SetBytes(int64(si.State.Bytes))
		for range b.N {
			if _, err := Snapshot(ctx, ca, StreamWebhooks, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		eb, err := StartEmbedded(EmbeddedOptions{DataDir: b.TempDir(), MaxPayload: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer eb.Shutdown()
		cb, err := Connect(ConnectOptions{Name: "restore", Embedded: eb})
		if err != nil {
			b.Fatal(err)
		}
		defer cb.Close()
		b.SetBytes(int64(si.State.Bytes))
		for range b.N {
			if err := Restore(ctx, cb, info.Config, info.State, RestoreOptions{Replicas: 1}, bytes.NewReader(snap.Bytes())); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := cb.JS.DeleteStream(ctx, StreamWebhooks); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Logf("WEBHOOKS: %d events, %d bytes stored, snapshot %d bytes", n, si.State.Bytes, snap.Len())
}

// A stream restored with RestoreOptions.Unfinished carries the mark until
// FinishRestore: meanwhile UnfinishedRestore and Provision refuse the
// server, naming the marked stream and every hookgate stream there, and
// Provision makes none of the missing ones (a restore onto nats.url killed
// part way left DLQ and GRANTS, and serve made WEBHOOKS empty and ran:
// stop 41). Finished, the mark is gone and Provision makes the rest.
func TestRestoreIsMarkedUntilFinished(t *testing.T) {
	ctx := t.Context()
	ea, ca := startEmbedded(t, t.TempDir(), testStreams())
	defer ea.Shutdown()
	defer ca.Close()
	if _, err := ca.JS.Publish(ctx, "dlq.p.a", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	info, err := Snapshot(ctx, ca, StreamDLQ, &snap)
	if err != nil {
		t.Fatal(err)
	}

	eb, cb := startEmbedded(t, t.TempDir(), StreamsConfig{})
	defer eb.Shutdown()
	defer cb.Close()
	for _, name := range BackupStreams {
		if err := cb.JS.DeleteStream(ctx, name); err != nil && !errors.Is(err, js.ErrStreamNotFound) {
			t.Fatal(err)
		}
	}
	if err := Restore(ctx, cb, info.Config, info.State, RestoreOptions{Replicas: 1, Unfinished: "restore from x"}, bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	s, err := cb.JS.Stream(ctx, StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Metadata[RestoreMetadata]; got != "restore from x" {
		t.Fatalf("restored DLQ's mark: %q, want the Unfinished text", got)
	}
	err = UnfinishedRestore(ctx, cb.JS)
	if !errors.Is(err, ErrUnfinishedRestore) || !strings.Contains(err.Error(), "streams with its mark: DLQ;") || !strings.Contains(err.Error(), "delete hookgate's streams there (whichever of DLQ, KV_WATERMARKS, KV_APPLIED, GRANTS, WEBHOOKS, AUDIT exist) and run hookgate restore again") {
		t.Fatalf("UnfinishedRestore on the marked server: %v", err)
	}
	if err := Provision(ctx, cb.JS, testStreams()); !errors.Is(err, ErrUnfinishedRestore) {
		t.Fatalf("Provision on the marked server: %v, want ErrUnfinishedRestore", err)
	}
	if _, err := cb.JS.Stream(ctx, StreamWebhooks); !errors.Is(err, js.ErrStreamNotFound) {
		t.Fatalf("Provision refused, yet WEBHOOKS is there: %v", err)
	}

	if err := FinishRestore(ctx, cb, []string{StreamDLQ, StreamGrants}); err != nil {
		t.Fatal(err)
	}
	if s, err = cb.JS.Stream(ctx, StreamDLQ); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.CachedInfo().Config.Metadata[RestoreMetadata]; ok {
		t.Fatalf("the mark is still on DLQ after FinishRestore: %v", s.CachedInfo().Config.Metadata)
	}
	if st, err := s.Info(ctx); err != nil || st.State.Msgs != 1 {
		t.Fatalf("DLQ after FinishRestore: %v %v, want its one message", st, err)
	}
	if err := UnfinishedRestore(ctx, cb.JS); err != nil {
		t.Fatalf("UnfinishedRestore after FinishRestore: %v", err)
	}
	if err := Provision(ctx, cb.JS, testStreams()); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.JS.Stream(ctx, StreamWebhooks); err != nil {
		t.Fatalf("WEBHOOKS after the restore finished and Provision: %v", err)
	}
}
