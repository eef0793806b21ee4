package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServeWarnsWhenAProvidersKeyRecipeChanged: a provider's event_id
// changed between two runs of serve gives a sender's retry of an event
// accepted before a new key, accepted and applied again (review AM). serve
// says so at the start after the change, naming the provider and both
// recipes, and only then: not at the first start, not at a start with the
// same recipe, not at the start after the one that warned.
func TestServeWarnsWhenAProvidersKeyRecipeChanged(t *testing.T) {
	const warning = "key recipe changed since the last start"
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hookgate.yaml")
	head := "http: { listen: \"127.0.0.1:0\" }\nnats: { embedded: { data_dir: ./data } }\n"
	changed := strings.Replace(review6Provider, `event_id: ["json:/id"]`, `event_id: ["json:/event/id", "json:/id"]`, 1)
	if changed == review6Provider {
		t.Fatal("setup: the provider's event_id line is not where the test expects it")
	}
	run := func(providers, want string) string {
		t.Helper()
		reviewAHWrite(t, cfgPath, head+providers)
		s := review7Start(t, cfgPath, true)
		review7MustSend(t, s.base, "a", want)
		if err := s.stop(t); err != nil {
			t.Fatal(err)
		}
		return s.stderr.String()
	}
	if log := run(review6Provider, "accepted"); strings.Contains(log, warning) {
		t.Errorf("first start warned %q:\n%s", warning, log)
	}
	if log := run(review6Provider, "duplicate"); strings.Contains(log, warning) {
		t.Errorf("a start with the same recipe warned %q:\n%s", warning, log)
	}
	// The body has no /event/id: the key is the same here. A sender whose
	// bodies had one would see its retries applied again.
	log := run(changed, "duplicate")
	if !strings.Contains(log, warning) || !strings.Contains(log, `"provider":"p"`) ||
		!strings.Contains(log, `"was":"event_id=[json:/id]`) || !strings.Contains(log, `"now":"event_id=[json:/event/id json:/id]`) {
		t.Errorf("a start after event_id changed: want the %q warning naming provider p and both recipes:\n%s", warning, log)
	}
	if log := run(changed, "duplicate"); strings.Contains(log, warning) {
		t.Errorf("the start after the one that warned warned again:\n%s", log)
	}
}
