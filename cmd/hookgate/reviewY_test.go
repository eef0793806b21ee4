package main

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
)

// forward.timeout only bounds the forward effect, and without
// forward.url there is none (CONTRACT: forward is "optional"; config:
// "off when URL is empty"). leaseTTL still takes every provider's
// timeout, so a provider with forwarding switched off
// (url: "${FORWARD_URL:-}" left unset) and a long timeout sets every
// subject's lease and the durable consumer's AckWait for all providers:
// after a crash each subject it held waits that long. config check says
// nothing about the ignored timeout.
func TestReviewYForwardTimeoutWithoutURLSetsTheLease(t *testing.T) {
	const data = `providers:
  quiet:
    signature: { scheme: github, secrets: [s3cret] }
    effects: { forward: { url: "${FORWARD_URL:-}", timeout: 30m } }
  loud:
    signature: { scheme: github, secrets: [s3cret] }
    effects: { forward: { url: "https://example.com/hook", timeout: 10s } }
`
	cfg, err := config.Parse([]byte(data), t.TempDir(), nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.Providers["quiet"].Effects.Forward.URL != "" {
		t.Fatalf("quiet forwards to %q; want no forward", cfg.Providers["quiet"].Effects.Forward.URL)
	}
	// The slowest effect run: loud's 10 s forward plus the 30 s room.
	if got, want := processorOptions(cfg).LeaseTTL, 10*time.Second+30*time.Second; got != want {
		t.Errorf("LeaseTTL = %v, want %v: the timeout of a forward that is off (quiet's 30m) sizes every lease and the AckWait", got, want)
	}
}
