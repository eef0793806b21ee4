package consumer

import (
	"errors"
	"testing"
)

// An operation the store named already is not named twice ("publish S:
// publish S: ..." read as two failures).
func TestWithOp(t *testing.T) {
	base := errors.New("publish grants.p.G-1.t: stream full")
	if got := withOp("publish grants.p.G-1.t", base); got != base {
		t.Fatalf("withOp of an error that names it: %q", got)
	}
	got := withOp("dead-letter", base)
	if got.Error() != "dead-letter: publish grants.p.G-1.t: stream full" || !errors.Is(got, base) {
		t.Fatalf("withOp = %q, want the operation before the error, which it wraps", got)
	}
}
