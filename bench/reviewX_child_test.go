package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The floor prints how many of its consumer's writes failed on stdout as
// it stops (floorFailedLine); round() reads it back from the child's log
// after Stop. Stop returns as soon as cmd.Wait has returned, and closes
// the log file; Wait closes the stdout pipe when the process exits. The
// goroutine copying stdout into the log may not have read (or written)
// the last line by then, so E2EResult.WriteFailures can read 0 for a
// consumer that retried writes (its rates "include those pauses", which
// the report then does not say).
func TestReviewXLastStdoutLineSurvivesStop(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ready.Close()
	addr := strings.TrimPrefix(ready.URL, "http://")
	// The trap before the listening line, as the floor (hookgate-bench's
	// main) takes SIGTERM from its start: a SIGTERM between the two
	// killed the shell silently, the test's own race (3 of 100).
	script := fmt.Sprintf(`trap 'echo "%s"; exit 0' TERM; echo "floor: listening on http://%s"; while :; do sleep 0.01; done`,
		fmt.Sprintf(floorFailedLine, 7), addr)
	lost := 0
	const tries = 100
	for i := range tries {
		log := filepath.Join(t.TempDir(), "server.log")
		c, err := StartChild(t.Context(), []string{"/bin/sh", "-c", script}, nil, log, "floor: listening on ", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if n := floorWriteFailures(c.LogTail(5)); n != 7 {
			lost++
			b, _ := os.ReadFile(log)
			if lost == 1 {
				t.Logf("try %d: read %d write failures; log:\n%s", i, n, b)
			}
		}
	}
	if lost > 0 {
		t.Errorf("the stopping line was lost %d of %d times", lost, tries)
	}
}
