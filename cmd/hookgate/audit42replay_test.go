package main

import (
	"strings"
	"testing"
)

// Each test below was written, failing, against the code before its fix, and
// its comment tells the defect as the audit found it: all are fixed since
// (stop 42), and the tests hold the fixes.

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

// `replay --from-seq 5 --to-seq 0`: bounds reversed (no WEBHOOKS
// sequence is 0), refused for any other --to-seq below --from-seq
// ("--from-seq 3 is after --to-seq 2", exit 2). An explicit --to-seq 0 is
// taken for "no upper bound" and silently dropped: the replay runs from 5
// to the stream's end (with --redeliver, every applied event's forward
// again). The check runs before the config is read, so a missing config
// file shows which way it went.
func TestAudit42ReplayToSeqZeroIsRefused(t *testing.T) {
	cfg := t.TempDir() + "/missing.yaml"
	if r := review9Run(t, "", "replay", "--from-seq", "3", "--to-seq", "2", "--config", cfg); r.code != 2 {
		t.Fatalf("setup: --from-seq 3 --to-seq 2: exit %d, want 2\n%s", r.code, r.stderr)
	}
	r := review9Run(t, "", "replay", "--from-seq", "5", "--to-seq", "0", "--redeliver", "--config", cfg)
	if r.code != 2 || !strings.Contains(r.stderr, "--to-seq") {
		t.Fatalf("--from-seq 5 --to-seq 0: exit %d, %q; want exit 2 naming --to-seq (reversed or empty range), not a replay from 5 to the end", r.code, strings.TrimSpace(r.stderr))
	}
}

// The contract: "T is RFC 3339". RFC 3339 (section 5.6, NOTE) lets "T"
// and "Z" be lower case; `replay --since 2026-12-05t11:30:00z` is refused
// as "neither an RFC 3339 time nor a duration like 2h" (exit 2), though it
// is one. (Time flags are checked before the config is read: a missing
// config file shows the time was taken.)
func TestAudit42ReplaySinceTakesLowerCaseRFC3339(t *testing.T) {
	cfg := t.TempDir() + "/missing.yaml"
	for _, ts := range []string{"2026-12-05t11:30:00z", "2026-12-05T11:30:00z"} {
		r := review9Run(t, "", "replay", "--since", ts, "--until", ts, "--config", cfg)
		if strings.Contains(r.stderr, "neither an RFC 3339 time") {
			t.Errorf("--since/--until %s (RFC 3339 allows lower-case t and z): exit %d, %q", ts, r.code, strings.TrimSpace(r.stderr))
		}
	}
}
