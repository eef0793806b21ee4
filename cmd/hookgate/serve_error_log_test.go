package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/jetstream"
)

// A serve that ends on an error says why in its JSON log, at error: the
// cause was only main's plain "hookgate: ..." line on stderr, which an
// alert on the JSON lines' level misses when nothing was logged at error
// before it (review Z). Here data_dir is locked by another holder.
func TestServeFailureIsLoggedAtError(t *testing.T) {
	dataDir := t.TempDir()
	lock, err := jetstream.LockDataDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	cfg := review9Config(t, dataDir, "")
	var out, errb bytes.Buffer
	runErr := run(t.Context(), []string{"serve", "--config", cfg}, func(string) string { return "" }, nil, &out, &errb)
	if runErr == nil {
		t.Fatal("serve on a locked data_dir did not fail")
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		var rec struct {
			Level, Msg, Error string
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" && rec.Msg == "serve failed" && strings.Contains(rec.Error, "data_dir is in use") {
			return
		}
	}
	t.Errorf("no JSON line at error saying why serve failed (%v):\n%s", runErr, errb.String())
}
