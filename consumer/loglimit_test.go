package consumer

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestLineLimit(t *testing.T) {
	l := NewLineLimit(2)
	at := time.Unix(1000, 0)
	var got []string
	for i := range 5 {
		ok, held := l.Allow("p", at.Add(time.Duration(i)*100*time.Millisecond))
		got = append(got, fmt.Sprint(ok, held))
	}
	if ok, held := l.Allow("other", at); !ok || held != 0 {
		t.Errorf("another key: %v %d, want its own budget", ok, held)
	}
	ok, held := l.Allow("p", at.Add(time.Second))
	got = append(got, fmt.Sprint(ok, held))
	if want := "[true 0 true 0 false 0 false 0 false 0 true 3]"; fmt.Sprint(got) != want {
		t.Errorf("allow: %v, want %s (two a second, the next line carrying the 3 held back)", got, want)
	}
}

// A burst's held-back lines are told at the end of their second by the
// last one kept, standing for all of them, when no later line carried the
// count; one that did carry it leaves nothing to tell.
func TestLineLimitTellsTheTailAtTheSecondsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLineLimit(2)
		var told []string
		line := func(i int) func(int) {
			return func(suppressed int) { told = append(told, fmt.Sprintf("line %d suppressed %d", i, suppressed)) }
		}
		try := func(key string, i int, at time.Time) {
			if ok, held := l.AllowOrLater(key, at, line(i)); ok {
				line(i)(held)
			}
		}
		start := time.Now()
		for i := range 6 {
			try("p", i, start)
		}
		time.Sleep(time.Until(time.Unix(start.Unix()+1, 0)) + time.Millisecond)
		synctest.Wait()
		if want := "[line 0 suppressed 0 line 1 suppressed 0 line 5 suppressed 3]"; fmt.Sprint(told) != want {
			t.Errorf("told %v, want %s: 6 lines, 2 let through, the last held one standing for the 4 held", told, want)
		}

		told = nil
		now := time.Now()
		for i := range 3 { // the third is held
			try("q", i, now)
		}
		try("q", 3, time.Unix(now.Unix()+1, 0))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if want := "[line 0 suppressed 0 line 1 suppressed 0 line 3 suppressed 1]"; fmt.Sprint(told) != want {
			t.Errorf("told %v, want %s: the next second's line carries the held one, and nothing is told twice", told, want)
		}
	})
}

// Flush tells a held-back tail at once (a stop), and only once.
func TestLineLimitFlushTellsTheTailNow(t *testing.T) {
	l := NewLineLimit(1)
	var told []int
	now := time.Now()
	for range 4 {
		if ok, held := l.AllowOrLater("p", now, func(s int) { told = append(told, s) }); ok {
			told = append(told, held)
		}
	}
	l.Flush()
	l.Flush()
	if want := "[0 2]"; fmt.Sprint(told) != want {
		t.Errorf("told %v, want %s: the line let through, then at the flush the last held one standing for the 3 held", told, want)
	}
}
