package consumer

import (
	"testing"
	"time"
)

func TestMarkCacheBoundedAndDroppable(t *testing.T) {
	c := newMarkCache(2)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c.put("a", Mark{At: at}, 1)
	c.put("b", Mark{At: at}, 2)
	if m, rev, ok := c.get("a"); !ok || rev != 1 || !m.At.Equal(at) {
		t.Fatalf("get a = %v %d %v", m, rev, ok)
	}
	c.put("a", Mark{At: at.Add(time.Second)}, 3) // an update never evicts
	if _, rev, ok := c.get("b"); !ok || rev != 2 {
		t.Fatalf("b evicted by an update of a: %d %v", rev, ok)
	}
	c.put("c", Mark{}, 4) // full: starts over
	if _, _, ok := c.get("a"); ok {
		t.Fatal("a survived a full cache")
	}
	if _, rev, ok := c.get("c"); !ok || rev != 4 {
		t.Fatalf("c = %d %v", rev, ok)
	}
	c.drop("c")
	if _, _, ok := c.get("c"); ok {
		t.Fatal("c survived drop")
	}
	var none *markCache // a processor without a cache reads every time
	none.put("x", Mark{}, 1)
	if _, _, ok := none.get("x"); ok {
		t.Fatal("nil cache returned an entry")
	}
}
