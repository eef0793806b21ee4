package consumer

import (
	"fmt"
	"testing"
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
