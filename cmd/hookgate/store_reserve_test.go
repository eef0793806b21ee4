package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// retention.*.max_bytes are ceilings, not space set aside: serve starts
// when their sum is more than the disk has free. Left to itself the
// embedded server sets aside every stream's max_bytes against 75% of the
// free disk at each start, so a config whose limits outgrow the free
// space failed to start ("stream full", naming whichever stream or bucket
// came last), also the first start of the default config (31 GB of
// limits) on a small disk, and a restart after a disk-full incident with
// only some space freed (review L). A full disk is reported where it
// happens instead (readyz, the log; see Known limits).
func TestServeStartsWithLimitsAboveTheFreeDisk(t *testing.T) {
	// Both roles: the consumer's buckets (no max_bytes of their own) are
	// created after the streams, and each needs room beside their limits.
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n"+
		"retention: { webhooks: { max_bytes: 900TB }, grants: { max_bytes: 900TB } }\n%s", t.TempDir(), freeAddr(t), review6Provider)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, cfgPath, true)
	review7MustSend(t, s.base, "big-limits", "accepted")
	// The consumer applies it: its buckets exist and take writes.
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, m := reviewMGet(s.base, "/metrics"); strings.Contains(m, `hookgate_consumer_events_total{decision="applied",provider="p"} 1`) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the event was not applied within 30 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
}
