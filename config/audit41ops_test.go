package config

import "testing"

// Audit 41 (operator at 3 a.m.): config check compares listen addresses
// as written, so http.admin_listen (or nats.embedded.listen) on
// "localhost:P" beside http.listen "127.0.0.1:P" passes ("ok"), and serve
// then stops at start with "listen localhost:P: ... bind: address already
// in use", a line that names neither key: the operator looks for another
// process holding the port. Review Y added the check for the identical
// spelling only.
func TestAudit41OpsListenCollisionThroughLocalhost(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(c *Config)
		key  string
	}{
		{"admin_listen localhost", func(c *Config) {
			c.HTTP.Listen = "127.0.0.1:18080"
			c.HTTP.AdminListen = "localhost:18080"
		}, "http.admin_listen"},
		{"nats listen localhost", func(c *Config) {
			c.HTTP.Listen = "localhost:18081"
			c.NATS.Embedded.Listen = "127.0.0.1:18081"
		}, "nats.embedded.listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, baseYAML, nil)
			tc.mut(c)
			ps := c.Check()
			if _, ok := findProblem(ps, tc.key, ""); !ok {
				t.Errorf("http.listen %q, http.admin_listen %q, nats.embedded.listen %q: config check finds nothing on %s (serve fails to bind); problems: %v",
					c.HTTP.Listen, c.HTTP.AdminListen, c.NATS.Embedded.Listen, tc.key, ps)
			}
		})
	}
}
