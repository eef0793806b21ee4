package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// Review BF (a black-box audit against the contract): "a body that fits
// max_body_bytes always fits a JetStream message". config check took up to
// 64 MiB less 64 KiB, but the file store refuses a message record over 32
// MiB: a signed body between the two got 503 "event store full; retry
// later" at every retry and was never stored. Now config check refuses a
// limit the store cannot hold, naming the key, and a body of exactly the
// largest limit it takes, with a large header block beside it, is stored.
func TestReviewBFLargestBodyLimitIsStored(t *testing.T) {
	if testing.Short() {
		t.Skip("posts a 32 MB body")
	}
	dir := t.TempDir()
	write := func(limit string) string {
		path := filepath.Join(dir, "hookgate.yaml")
		yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\", max_body_bytes: %s }\nroles: { consumer: false }\nnats: { embedded: { data_dir: %q } }\n%s",
			limit, filepath.Join(dir, "data"), review6Provider)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"config", "check", write("40MB")}, func(string) string { return "" }, nil, &out, &out)
	if code := exitCode(err, io.Discard); code != 1 || !strings.Contains(out.String(), "http.max_body_bytes: 40000000 is above the limit of 32696 KiB") {
		t.Fatalf("config check of max_body_bytes 40MB: exit %d\n%s\nwant exit 1 naming http.max_body_bytes", code, out.String())
	}
	const largest = 32<<20 - 64<<10 - 8<<10
	out.Reset()
	path := write(fmt.Sprint(largest))
	if err := run(context.Background(), []string{"config", "check", path}, func(string) string { return "" }, nil, &out, &out); err != nil {
		t.Fatalf("config check refuses the largest limit: %v\n%s", err, out.String())
	}
	s := review7Start(t, path, true)

	prefix := `{"id":"big-1","grant_id":"g-1","at":"2026-12-01T10:00:00Z","pad":"`
	body := []byte(prefix + strings.Repeat("x", largest-len(prefix)-2) + `"}`)
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sch.Sign(body, config.Secret(review6Secret), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.base+"/webhooks/p", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	for i := range 40 { // 40 KiB of request headers, all stored
		req.Header.Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 1000))
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"accepted"`)) {
		t.Fatalf("a %d-byte body at max_body_bytes: %d %s; want 200 accepted", len(body), resp.StatusCode, bytes.TrimSpace(answer))
	}
}

// The contract's exit 2 on usage errors: every other command refuses a
// stray argument; serve ignored it and started, so `HOOKGATE_CONFIG=a.yaml
// hookgate serve b.yaml` ran a.yaml without a word.
func TestReviewBFServeRefusesAStrayArgument(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"serve", "--config", filepath.Join(t.TempDir(), "a.yaml"), "b.yaml"}, func(string) string { return "" }, nil, &stdout, &stderr)
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), `"b.yaml"`) {
		t.Fatalf("serve --config a.yaml b.yaml: %v; want a usage error (exit 2) naming b.yaml", err)
	}
	err = run(ctx, []string{"version", "extra"}, func(string) string { return "" }, nil, &stdout, &stderr)
	if !errors.As(err, &u) {
		t.Fatalf("version extra: %v; want a usage error", err)
	}
}
