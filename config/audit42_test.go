package config

import (
	"os"
	"strings"
	"testing"
)

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
