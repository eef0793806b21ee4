package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Each test below was written, failing, against the code before its fix, and
// its comment tells the defect as the audit found it: all are fixed since
// (stop 42), and the tests hold the fixes.

// Audit 42 (config): two listen addresses that are one socket are an
// error "also when spelt apart" (README), but a port written with a
// leading zero is not seen as the same: http.admin_listen
// "127.0.0.1:023880" beside http.listen "127.0.0.1:23880" checks "ok", and
// serve then stops at start with "http.admin_listen: listen tcp
// 127.0.0.1:23880: bind: address already in use" (Go reads 023880 as
// port 23880), by hand.
func TestAudit42CLIListenPortWrittenWithALeadingZero(t *testing.T) {
	c := mustParse(t, baseYAML, nil)
	c.HTTP.Listen = "127.0.0.1:23880"
	c.HTTP.AdminListen = "127.0.0.1:023880"
	if _, ok := findProblem(c.Check(), "http.admin_listen", ""); !ok {
		t.Errorf("http.listen %q, http.admin_listen %q (one socket): config check finds nothing on http.admin_listen, and serve fails to bind; problems: %v", c.HTTP.Listen, c.HTTP.AdminListen, c.Check())
	}
}

// Audit 42: a variable set to the empty string (export GRANTSGOV_SECRET=,
// a secret fetch that wrote nothing) is reported "environment variable
// AUDIT42_EMPTY is not set": the operator runs `printenv`, finds it set,
// and looks elsewhere. The message should say it is empty (or "unset or
// empty"); expand's comment says getenv cannot tell the two apart, which
// os.LookupEnv can.
func TestAudit42CLISetButEmptyVariableIsNotCalledUnset(t *testing.T) {
	t.Setenv("AUDIT42_EMPTY", "")
	yaml := "providers:\n  p:\n    signature: { scheme: github, secrets: [\"${AUDIT42_EMPTY}\"] }\n"
	var msg string
	c, err := Parse([]byte(yaml), t.TempDir(), os.Getenv)
	if err != nil {
		msg = err.Error()
	} else {
		msg = c.Check().Error()
	}
	if strings.Contains(msg, "AUDIT42_EMPTY is not set") {
		t.Errorf("AUDIT42_EMPTY is set (to \"\"), and config check says: %s", msg)
	}
}

// Audit 42: the retry schedule is not held against
// retention.webhooks.max_age. With consumer.backoff [1000h] (or a
// max_deliver whose backoff steps add up past max_age: [1s, 5s, 30s, 2m,
// 10m] with max_deliver 5000 is 34 days against the default 30), an event
// whose effect keeps failing is deleted from WEBHOOKS at max_age before
// its last attempt: never applied, never dead-lettered, no letter for
// `dlq replay`. config check answers "ok" and serve starts without a word
// (by hand); the README's Events lost to max_age are reported only once
// they happen.
func TestAudit42CLIRetryScheduleLongerThanWebhooksMaxAge(t *testing.T) {
	c := mustParse(t, baseYAML, nil)
	c.Consumer.Backoff = []time.Duration{1000 * time.Hour}
	c.Consumer.MaxDeliver = 8
	c.Retention.Webhooks.MaxAge = 720 * time.Hour
	ps := c.Check()
	if p, ok := findProblem(ps, "consumer.backoff[0]", ""); !ok || !p.Warning {
		t.Errorf("consumer.backoff [1000h], max_deliver 8, retention.webhooks.max_age 720h: the first retry comes after the event has left WEBHOOKS, and config check does not warn on consumer.backoff[0]; problems: %v", ps)
	}

	// The default delays, 5000 attempts: 34 days of retries against 30.
	c = mustParse(t, baseYAML, nil)
	c.Consumer.MaxDeliver = 5000
	if p, ok := findProblem(c.Check(), "consumer.max_deliver", "past retention.webhooks.max_age"); !ok || !p.Warning {
		t.Errorf("consumer.max_deliver 5000 with backoff %v against max_age %s: no warning on consumer.max_deliver; problems: %v", c.Consumer.Backoff, c.Retention.Webhooks.MaxAge, c.Check())
	}
	// The defaults: 8 attempts, about 45 minutes of delays.
	c = mustParse(t, baseYAML, nil)
	for _, p := range c.Check() {
		if strings.HasPrefix(p.Key, "consumer.") {
			t.Errorf("the default consumer settings are warned about: %v", p)
		}
	}
}
