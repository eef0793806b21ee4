package consumer_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// crashEvents is a small history: two grants, out-of-order and same-instant
// events, a redelivered duplicate key is impossible here (the gateway
// dedups), so duplicates come from crashes.
var crashEvents = []ev{
	{"k1", "G-1", "2026-11-30T10:00:00Z", "a"},
	{"k2", "G-1", "2026-11-30T11:00:00Z", "b"},
	{"k3", "G-2", "2026-11-30T10:00:00Z", "a"},
	{"k4", "G-1", "2026-11-30T10:30:00Z", "c"}, // stale
	{"k5", "G-1", "2026-11-30T11:00:00Z", "d"}, // same instant as k2
	{"k6", "G-2", "2026-11-30T12:00:00Z", "b"},
}

type finalState struct {
	grants []string
	marks  map[string]string
}

func snapshot(t *testing.T, env *jstest.Env) finalState {
	t.Helper()
	g := grants(t, env)
	slices.Sort(g)
	marks := map[string]string{}
	for _, s := range []string{"G-1", "G-2"} {
		m := mark(t, env, s)
		if m.Lease != nil {
			t.Fatalf("%s still leased after settling: %+v", s, m)
		}
		marks[s] = fmt.Sprintf("%s %v", m.At.UTC().Format("15:04"), m.Keys)
	}
	return finalState{grants: g, marks: marks}
}

// TestCrashAtEveryStepConverges kills the consumer at each step boundary
// while it applies k2, restarts it (new owner, the dead one's lease and
// delivery expire), and checks GRANTS and the watermarks equal a run
// without faults: no effect twice, nothing lost, no mark backwards.
// GRANTS's duplicate window is 100 ms, shorter than any redelivery here:
// the sequenced publish alone keeps a repeat out.
func TestCrashAtEveryStepConverges(t *testing.T) {
	base := jstest.StartWith(t, "", jstest.ShortGrantsWindow())
	for _, e := range crashEvents {
		store(t, base, e)
	}
	start(t, base, newProcessor(base, "clean", true, &auditLog{}), 1)
	waitSettled(t, base)
	want := snapshot(t, base)
	if len(want.grants) != 5 {
		t.Fatalf("fault-free run published %d, want 5: %v", len(want.grants), want.grants)
	}

	for _, step := range consumer.CrashSteps {
		t.Run(step, func(t *testing.T) {
			env := jstest.StartWith(t, "", jstest.ShortGrantsWindow())
			for _, e := range crashEvents {
				store(t, env, e)
			}
			var (
				mu   sync.Mutex
				dead bool
				hit  bool
			)
			proc := newProcessor(env, "first", true, &auditLog{})
			consumer.SetCrash(proc, func(s, key string) bool {
				mu.Lock()
				defer mu.Unlock()
				if dead {
					return true
				}
				if s == step && key == "k2" {
					dead, hit = true, true
					return true
				}
				return false
			})
			// The dead process's delivery of k2 comes back after the ack wait.
			r := startAckWait(t, env, proc, 1, time.Second)
			waitFor(t, "the crash at "+step, func() bool { mu.Lock(); defer mu.Unlock(); return hit })
			r.stop()

			startAckWait(t, env, newProcessor(env, "second", true, &auditLog{}), 1, time.Second)
			waitSettled(t, env)
			got := snapshot(t, env)
			if strings.Join(got.grants, "\n") != strings.Join(want.grants, "\n") {
				t.Fatalf("GRANTS after crash at %s:\n%s\nwant:\n%s", step, strings.Join(got.grants, "\n"), strings.Join(want.grants, "\n"))
			}
			if fmt.Sprint(got.marks) != fmt.Sprint(want.marks) {
				t.Fatalf("marks after crash at %s = %v, want %v", step, got.marks, want.marks)
			}
		})
	}
}

var _ = event.Token
