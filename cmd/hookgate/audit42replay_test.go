package main

import (
	"strings"
	"testing"
)

// `hookgate dlq --config FILE` (the subcommand forgotten, as typed from
// shell history): the usage error names the config file as a bad DLQ
// sequence number (`dlq --config: "FILE" is not a DLQ sequence number`)
// instead of saying the subcommand (list|show|replay|remove) is missing.
// subcommandFirst's comment says such arguments are left "for the usage
// error", and review V fixed exactly this message when a subcommand was
// present.
func TestAudit42ReplayDlqWithoutSubcommandSaysSo(t *testing.T) {
	r := review9Run(t, "", "dlq", "--config", "hookgate.yaml")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2 (usage)\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "sequence number") || !strings.Contains(r.stderr, "list|show") {
		t.Fatalf("dlq without a subcommand: %q; want the missing subcommand named (list|show|replay|remove), not the config file called a sequence number", strings.TrimSpace(r.stderr))
	}
}
