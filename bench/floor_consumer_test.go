package bench

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// floorJS starts an embedded server in a temp dir with the FLOOR stream
// and returns an in-process JetStream client; both end with tb.
func floorJS(tb testing.TB) js.JetStream {
	tb.Helper()
	ns, err := StartEmbeddedServer(tb.TempDir(), 1<<20, 0, "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	j, err := js.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := j.CreateStream(tb.Context(), FloorStream(1<<20)); err != nil {
		tb.Fatal(err)
	}
	return j
}

func TestFloorFields(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	subject, got, ok := floorFields(Body("evt_1", "G-3-17", at, 1024))
	if !ok || string(subject) != "G-3-17" || !got.Equal(at) {
		t.Fatalf("floorFields(Body) = %q, %v, %t; want G-3-17, %v, true", subject, got, ok, at)
	}
	for _, body := range []string{`{"grant_id":"G-1"}`, `{"occurred_at":"2026-12-02T10:00:00Z"}`, `{"grant_id":"","occurred_at":"2026-12-02T10:00:00Z"}`, `{"grant_id":"G-1","occurred_at":"yesterday"}`, `{"grant_id":"G-1`} {
		if _, _, ok := floorFields([]byte(body)); ok {
			t.Fatalf("floorFields(%s): ok, want not", body)
		}
	}
	if k := floorKey([]byte("G-3_17")); k != "G-3_17" {
		t.Fatalf("floorKey(G-3_17) = %q", k)
	}
	if k := floorKey([]byte("a.b")); k != "x612e62" {
		t.Fatalf("floorKey(a.b) = %q, want x612e62", k)
	}
}

// The floor's consumer does the writes it stands for: every event newer
// than its subject's watermark is published to FLOOR_GRANTS once and moves
// the watermark (by compare-and-set, starting from entries an earlier run
// left), an older one is acknowledged and not published; with Lease the
// entry is claimed first, one more revision per event.
func TestFloorConsumerApplies(t *testing.T) {
	for _, lease := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease=%t", lease), func(t *testing.T) {
			ctx := t.Context()
			j := floorJS(t)
			// An entry from an earlier run: the consumer does not know its
			// revision and must read it on the conflict.
			kv, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: FloorMarksBucket, History: 1, Storage: js.FileStorage})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
			if _, err := kv.Put(ctx, "G-0", []byte(t0.Format(time.RFC3339Nano))); err != nil {
				t.Fatal(err)
			}
			publish := func(id, grant string, at time.Time) {
				t.Helper()
				if _, err := j.PublishMsg(ctx, &nats.Msg{Subject: "floor.in", Data: Body(id, grant, at, 256)}, js.WithMsgID(id)); err != nil {
					t.Fatal(err)
				}
			}
			const subjects, per = 5, 20
			for i := range per {
				for s := range subjects {
					publish(fmt.Sprintf("evt-%d-%d", s, i), fmt.Sprintf("G-%d", s), t0.Add(time.Duration(i+1)*time.Second))
				}
			}
			publish("evt-stale", "G-1", t0.Add(time.Second)) // older than G-1's watermark by then
			stop, err := startFloorConsumer(ctx, j, 1<<20, FloorConsumerOptions{Workers: 3, Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			cons, err := j.Consumer(ctx, FloorStream(0).Name, FloorDurable)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				info, err := cons.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if info.NumPending == 0 && info.NumAckPending == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("consumer still has %d pending, %d unacked", info.NumPending, info.NumAckPending)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if failed := stop(); failed != 0 {
				t.Fatalf("%d writes failed", failed)
			}
			grants, err := j.Stream(ctx, FloorGrantsStream)
			if err != nil {
				t.Fatal(err)
			}
			if n := grants.CachedInfo().State.Msgs; n != subjects*per {
				t.Fatalf("FLOOR_GRANTS holds %d messages, want %d", n, subjects*per)
			}
			last, err := grants.GetLastMsgForSubject(ctx, "fgrants.G-1")
			if err != nil {
				t.Fatal(err)
			}
			if id := last.Header.Get(nats.MsgIdHdr); id != fmt.Sprintf("evt-1-%d", per-1) {
				t.Fatalf("G-1's last GRANTS message is %q, want its newest event", id)
			}
			for s := range subjects {
				e, err := kv.Get(ctx, fmt.Sprintf("G-%d", s))
				if err != nil {
					t.Fatal(err)
				}
				if want := t0.Add(per * time.Second).Format(time.RFC3339Nano); string(e.Value()) != want {
					t.Fatalf("G-%d's watermark %q, want %q", s, e.Value(), want)
				}
			}
			st, err := j.Stream(ctx, "KV_"+FloorMarksBucket)
			if err != nil {
				t.Fatal(err)
			}
			want := uint64(1 + subjects*per) // the earlier run's entry, then one commit per event
			if lease {
				want += subjects * per
			}
			if got := st.CachedInfo().State.LastSeq; got != want {
				t.Fatalf("FLOOR_MARKS took %d writes, want %d", got, want)
			}
		})
	}
}

// BenchmarkFloorConsumerDrain is the floor's consumer alone, the way
// jetstream's BenchmarkConsumerDrain measures hookgate's: b.N events (1 KB
// bench bodies, 1000 subjects, times increasing per subject) stored first,
// then applied with 8 or 32 workers, with and without the lease, until
// FLOOR_GRANTS holds all. It reports events/s and CPU µs per event (the
// whole process: the embedded server is in it), for the two to be
// compared in one run.
func BenchmarkFloorConsumerDrain(b *testing.B) {
	for _, workers := range []int{8, 32} {
		for _, lease := range []bool{false, true} {
			b.Run(fmt.Sprintf("workers=%d/lease=%t", workers, lease), func(b *testing.B) {
				benchmarkFloorDrain(b, FloorConsumerOptions{Workers: workers, Lease: lease})
			})
		}
	}
}

func benchmarkFloorDrain(b *testing.B, o FloorConsumerOptions) {
	ctx := b.Context()
	j := floorJS(b)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := range b.N {
		id := fmt.Sprintf("bench:default:evt:%d", i)
		body := Body(id, fmt.Sprintf("G-%d", i%1000), t0.Add(time.Duration(i)*time.Millisecond), 1024)
		if _, err := j.PublishMsg(ctx, &nats.Msg{Subject: "floor.in", Data: body}, js.WithMsgID(id)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	stop, err := startFloorConsumer(ctx, j, 1<<20, o)
	if err != nil {
		b.Fatal(err)
	}
	for {
		st, err := j.Stream(ctx, FloorGrantsStream)
		if err != nil {
			b.Fatal(err)
		}
		if st.CachedInfo().State.Msgs >= uint64(b.N) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.StopTimer()
	if failed := stop(); failed > 0 {
		b.Fatalf("%d writes failed", failed)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
}

// The harness reads back the failure count the floor child prints.
func TestFloorWriteFailures(t *testing.T) {
	line := fmt.Sprintf(floorFailedLine, 17)
	for _, tc := range []struct {
		log  string
		want uint64
	}{
		{"floor: listening on http://127.0.0.1:1\n" + line, 17},
		{line + "\nsomething after", 17},
		{"floor: listening on http://127.0.0.1:1", 0},
		{"", 0},
	} {
		if got := floorWriteFailures(tc.log); got != tc.want {
			t.Errorf("floorWriteFailures(%q) = %d, want %d", tc.log, got, tc.want)
		}
	}
	if e := (&E2EResult{WriteFailures: 17}); !strings.Contains(e2eNote(e), "17 writes failed") {
		t.Errorf("e2eNote does not report the failures: %q", e2eNote(e))
	}
}
