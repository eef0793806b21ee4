package gateway

import (
	"testing"
	"time"
)

func TestRejectLimiterFoldsFloodIntoSuppressed(t *testing.T) {
	l := newRejectLimiter(3, nil)
	t0 := time.Unix(1000, 0)
	var allowed int
	for i := range 10 {
		ok, s := l.allow("p", t0.Add(time.Duration(i)*time.Millisecond), nil)
		if ok {
			allowed++
			if s != 0 {
				t.Fatalf("first window carried suppressed=%d", s)
			}
		}
	}
	if allowed != 3 {
		t.Fatalf("allowed %d in one second, want 3", allowed)
	}
	// Another provider has its own budget.
	if ok, _ := l.allow("q", t0, nil); !ok {
		t.Fatal("provider q limited by p's flood")
	}
	ok, s := l.allow("p", t0.Add(1500*time.Millisecond), nil)
	if !ok || s != 7 {
		t.Fatalf("next window: ok=%v suppressed=%d, want true/7", ok, s)
	}
}
