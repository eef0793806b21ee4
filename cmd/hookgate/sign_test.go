package main

import (
	"strings"
	"testing"
)

// sign takes any id a header carries unchanged (the gateway keys an id
// with a space by its hash, and an operator reproducing such a delivery
// needs its headers), and refuses an explicitly empty --id instead of
// making one up.
func TestSignID(t *testing.T) {
	cfg := review9Config(t, t.TempDir(), "")
	const body = `{"grant_id":"G-1","occurred_at":"2026-12-01T10:00:00Z"}`
	for _, c := range []struct {
		id       string
		code     int
		contains string // in stdout when 0, in stderr otherwise
	}{
		{"grant award 7", 0, "Webhook-Id: grant award 7\n"},
		{"msg_1", 0, "Webhook-Id: msg_1\n"},
		{"", 2, "--id is empty"},
		{" padded", 1, "whitespace"},
	} {
		r := review9Run(t, body, "sign", "--config", cfg, "--provider", "grants", "--id", c.id, "--timestamp", "1764583200")
		out := r.stdout
		if c.code != 0 {
			out = r.stderr
		}
		if r.code != c.code || !strings.Contains(out, c.contains) {
			t.Errorf("sign --id %q: exit %d, want %d with %q\nstdout: %sstderr: %s", c.id, r.code, c.code, c.contains, r.stdout, r.stderr)
		}
	}
	// No --id at all still makes one up.
	if r := review9Run(t, body, "sign", "--config", cfg, "--provider", "grants"); r.code != 0 || !strings.Contains(r.stdout, "Webhook-Id: msg_") {
		t.Errorf("sign without --id: exit %d\nstdout: %sstderr: %s", r.code, r.stdout, r.stderr)
	}
}
