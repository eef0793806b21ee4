package main

// Review AS: backup/restore and months of running with the embedded server.

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

func reviewASCopy(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v %s", src, dst, err, out)
	}
}

// TestReviewASHoldsPlainCopyUnderLoadRestores (holds): cp -a of the whole
// data_dir (its lock file and key index snapshot along) while serve takes
// webhooks; the copy starts, and every event answered 200 before the copy
// began is stored in it once and its retry answered duplicate.
func TestReviewASHoldsPlainCopyUnderLoadRestores(t *testing.T) {
	dataA, dataB := t.TempDir(), filepath.Join(t.TempDir(), "restored")
	addrA, addrB := freeAddr(t), freeAddr(t)
	cfgA := review7Config(t, dataA, addrA, "", "")
	cfgB := review7Config(t, dataB, addrB, "", "")
	a := review7Start(t, cfgA, true)
	for i := range 200 {
		review7MustSend(t, a.base, fmt.Sprintf("pre%d", i), "accepted")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := &http.Client{Timeout: 20 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _, _ = review7Send(c, a.base, fmt.Sprintf("load%d", i))
		}
	}()
	reviewASCopy(t, dataA, dataB)
	close(stop)
	<-done
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	b := review7Start(t, cfgB, true)
	stored := review7Stored(t, addrB)
	for i := range 200 {
		if k := fmt.Sprintf("p:default:evt:pre%d", i); stored[k] != 1 {
			t.Errorf("%s stored %d times in the copy", k, stored[k])
		}
	}
	review7MustSend(t, b.base, "pre7", "duplicate")
}

// TestReviewASWatermarksGrowForeverUndocumented: WATERMARKS keeps one
// entry per subject (grant id) for ever: no TTL, no max_bytes, no
// retention.* key, and README's Sizing counts the key index, GRANTS's
// window and APPLIED per key but says nothing of WATERMARKS. After a year
// of millions of grant ids the bucket (an entry of ~150-300 B on disk,
// plus the server's per-subject index in memory: NOTES-jetstream, #8485
// RSS 2-3x disk) grows without a bound or a word; `hookgate status` counts
// the entries but no problem is ever raised.
func TestReviewASWatermarksGrowForeverUndocumented(t *testing.T) {
	dataDir, addr := t.TempDir(), freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	reviewAHWrite(t, cfgPath, fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s", dataDir, addr, review6Provider))
	s := review7Start(t, cfgPath, true)
	review7MustSend(t, s.base, "w1", "accepted")
	serveWaitFor(t, s, "applied", func() bool { return reviewAHApplied(s) >= 1 })
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "reviewAS", URL: "nats://" + addr, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.JS.Stream(t.Context(), "KV_"+jetstream.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sizing := string(readme)
	if i := strings.Index(sizing, "**Sizing.**"); i >= 0 {
		sizing = sizing[i:]
		if j := strings.Index(sizing, "**A full disk**"); j >= 0 {
			sizing = sizing[:j]
		}
	}
	if cfg.MaxAge == 0 && cfg.MaxBytes <= 0 && !strings.Contains(sizing, "WATERMARKS") {
		t.Errorf("KV_%s has no max_age and no max_bytes (%v, %d): one entry per subject for ever, and README's Sizing does not mention it",
			jetstream.BucketMarks, cfg.MaxAge, cfg.MaxBytes)
	}
}
