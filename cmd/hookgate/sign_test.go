package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
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

// sign says on stderr when --id or --timestamp has no header to go in
// (stripe and hmac-sha256 send no id, github and hmac-sha256 no time),
// where it dropped them without a word (a security audit, stop 41); the
// headers on stdout are the same either way.
func TestSignSaysWhatItDoesNotUse(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookgate.yaml")
	yaml := `nats: { embedded: { data_dir: "` + filepath.Join(dir, "data") + `" } }
providers:
  st: { signature: { scheme: stripe, secrets: ["whsec_0123456789abcdef0123456789"] } }
  gh: { signature: { scheme: github, secrets: ["0123456789abcdef0123456789abcdef"] } }
  hm: { signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["0123456789abcdef0123456789abcdef"] } }
  sw: { signature: { scheme: standard-webhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"] } }
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		provider       string
		idSaid, tsSaid bool
	}{
		{"st", true, false}, {"gh", false, true}, {"hm", true, true}, {"sw", false, false},
	} {
		r := review9Run(t, `{"id":"evt_1"}`, "sign", "--config", cfg, "--provider", c.provider, "--id", "evt_1", "--timestamp", "1764583200")
		if r.code != 0 || r.stdout == "" {
			t.Fatalf("sign --provider %s: exit %d\n%s%s", c.provider, r.code, r.stdout, r.stderr)
		}
		if got := strings.Contains(r.stderr, "--id is not used"); got != c.idSaid {
			t.Errorf("sign --provider %s --id: said it is not used: %t, want %t\n%s", c.provider, got, c.idSaid, r.stderr)
		}
		if got := strings.Contains(r.stderr, "--timestamp is not used"); got != c.tsSaid {
			t.Errorf("sign --provider %s --timestamp: said it is not used: %t, want %t\n%s", c.provider, got, c.tsSaid, r.stderr)
		}
	}
}

// signUses is what each scheme's Sign does: another id or time changes
// the headers exactly when signUses says it is used.
func TestSignUsesMatchesTheSchemes(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	secrets := map[string]string{
		gateway.SchemeStripe: "whsec_0123456789abcdef0123456789", gateway.SchemeStandardWebhooks: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	}
	for _, scheme := range config.Schemes() {
		o := gateway.SchemeOptions{Tolerance: time.Minute}
		if scheme == gateway.SchemeHMACSHA256 {
			o.Header = "X-Sig"
		}
		sch, err := gateway.NewScheme(scheme, o)
		if err != nil {
			t.Fatal(err)
		}
		secret := config.Secret(cmp.Or(secrets[scheme], "0123456789abcdef0123456789abcdef"))
		sign := func(id string, ts int64) string {
			h, err := sch.Sign(body, secret, id, time.Unix(ts, 0))
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(h)
		}
		usesID, usesTS := signUses(scheme)
		if got := sign("a", 1764583200) != sign("b", 1764583200); got != usesID {
			t.Errorf("%s: another id changes the headers: %t; signUses says %t", scheme, got, usesID)
		}
		if got := sign("a", 1764583200) != sign("a", 1764583201); got != usesTS {
			t.Errorf("%s: another time changes the headers: %t; signUses says %t", scheme, got, usesTS)
		}
	}
}
