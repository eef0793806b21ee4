package main

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/hookgate/hookgate/config"
)

// The largest http.max_body_bytes `config check` accepts is one the
// embedded server starts with (the body plus headerRoom as its max
// payload; nats-server refuses one above its max pending, 64 MiB), and
// the next byte is refused by the check, not by a failing serve.
func TestLargestBodyLimitServes(t *testing.T) {
	largest := int64(-1)
	for _, n := range []int64{64<<20 - 64<<10, 64<<20 - 64<<10 + 1} {
		cfg, err := config.Parse(fmt.Appendf(nil, "http: { max_body_bytes: %d }\nnats: { embedded: { data_dir: %q } }\n", n, t.TempDir()), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Validate() != nil {
			continue
		}
		largest = n
		s, err := openSystem(t.Context(), cfg, slog.New(slog.DiscardHandler), "test", readWrite)
		if err != nil {
			t.Fatalf("max_body_bytes %d passes the check, but: %v", n, err)
		}
		s.Close()
	}
	if largest != 64<<20-64<<10 {
		t.Fatalf("largest max_body_bytes accepted: %d, want %d", largest, 64<<20-64<<10)
	}
}
