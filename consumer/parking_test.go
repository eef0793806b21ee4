package consumer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/jetstream"
)

// An event handed back untried keeps its place among its subject's events:
// a newer event that arrives before it comes back is handed back behind
// it, not applied ahead of it (which would make it stale). Here e is
// handed back because its subject waits for d, in doubt after its holder
// crashed; d's redelivery applies; f, newer, arrives from the stream
// before e comes back. (TestConsumerHolderKill9KeepsEachSubjectsOrder lost
// events this way on a standby that took over from a killed holder.)
func TestHandedBackEventKeepsItsPlaceInItsSubject(t *testing.T) {
	s := newSeqEnv(t)
	fx := jetstream.NewEffects(s.env.Conn)
	deliver := func(p *consumer.Processor, e ev, seq uint64, n int) consumer.Outcome {
		t.Helper()
		x := s.event(t, e)
		x.Seq = seq
		return p.Process(t.Context(), &consumer.Message{Event: x, Deliveries: n, Delivery: nopDelivery{}})
	}
	d := ev{"d", "G-1", "2026-11-30T10:00:00Z", "a"}
	e := ev{"e", "G-1", "2026-11-30T11:00:00Z", "a"}
	f := ev{"f", "G-1", "2026-11-30T12:00:00Z", "a"}
	a := s.proc("a", fx, &auditLog{})
	consumer.SetCrash(a, func(step, key string) bool { return step == "after-effects" && key == "d" })
	if out := deliver(a, d, 1, 1); out.Decision != "crashed" {
		t.Fatalf("d: %+v, want crashed after its effects", out)
	}
	s.advance(90 * time.Second) // past d's lease, within the in-doubt wait

	b := s.proc("b", fx, &auditLog{})
	steps := []struct {
		e    ev
		seq  uint64
		n    int
		want string
	}{
		{e, 2, 1, consumer.Retry},   // handed back: the subject waits for d
		{d, 1, 2, consumer.Applied}, // d's redelivery settles it
		{f, 3, 1, consumer.Retry},   // newer than e, which has not come back
		{e, 2, 2, consumer.Applied},
		{f, 3, 2, consumer.Applied},
	}
	for i, st := range steps {
		if out := deliver(b, st.e, st.seq, st.n); out.Decision != st.want {
			t.Fatalf("step %d, %s (seq %d): %+v, want %s", i, st.e.key, st.seq, out, st.want)
		}
	}
	want := "grants.grants.G-1.a d,grants.grants.G-1.a e,grants.grants.G-1.a f"
	if got := s.applied(t); strings.Join(got, ",") != want {
		t.Fatalf("GRANTS = %v, want %s", got, want)
	}
}
