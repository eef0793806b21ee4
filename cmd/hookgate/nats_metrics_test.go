package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// /metrics names each NATS connection's state and whether this instance
// applies events; a gateway-only serve has neither the consumer's
// connection nor its gauge at 1.
func TestMetricsShowNATSConnectionsAndTheApplyingInstance(t *testing.T) {
	for _, tt := range []struct {
		roles string
		want  []string
		not   []string
	}{
		{"{ gateway: true, consumer: true }", []string{
			`hookgate_nats_connected{connection="hookgate-serve"} 1`,
			`hookgate_nats_connected{connection="hookgate-consumer"} 1`,
			`hookgate_nats_reconnects_total{connection="hookgate-serve"} 0`,
			`hookgate_nats_reconnects_total{connection="hookgate-consumer"} 0`,
			"hookgate_consumer_applying 1",
		}, nil},
		{"{ gateway: true, consumer: false }", []string{
			`hookgate_nats_connected{connection="hookgate-serve"} 1`,
		}, []string{`connection="hookgate-consumer"`, "hookgate_consumer_applying"}},
	} {
		t.Run(tt.roles, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookgate.yaml")
			yaml := fmt.Sprintf("http: { listen: 127.0.0.1:0 }\nroles: %s\nnats: { embedded: { data_dir: %q } }\n%s",
				tt.roles, filepath.Join(t.TempDir(), "data"), review6Provider)
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			s := review7Start(t, path, true)
			var body string
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, body = reviewMGet(s.base, "/metrics")
				missing := ""
				for _, w := range tt.want {
					if !strings.Contains(body, w) {
						missing = w
						break
					}
				}
				if missing == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/metrics lacks %s after 20 s:\n%s", missing, grepLines(body, "hookgate_nats_|hookgate_consumer_applying"))
				}
				time.Sleep(50 * time.Millisecond)
			}
			for _, n := range tt.not {
				if strings.Contains(body, n) {
					t.Errorf("/metrics has %s:\n%s", n, grepLines(body, "hookgate_nats_|hookgate_consumer_applying"))
				}
			}
			if err := s.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// grepLines returns the lines of s containing any of the |-separated words.
func grepLines(s, words string) string {
	var out []string
	for line := range strings.Lines(s) {
		for w := range strings.SplitSeq(words, "|") {
			if strings.Contains(line, w) {
				out = append(out, strings.TrimRight(line, "\n"))
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
