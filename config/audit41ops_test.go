package config

import (
	"os"
	"path/filepath"
	"testing"
)

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

// Audit 41: nats.embedded.data_dir naming an existing file (a typo, a
// path into the wrong volume) checks "ok", and serve then stops at start
// with "create data_dir: mkdir FILE: not a directory". config check
// already reads the files a config names (http.tls, nats.tls, file:
// secrets); this one it could name before the restart at 3 a.m.
func TestAudit41OpsDataDirThatIsAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, baseYAML, nil)
	c.NATS.Embedded.DataDir = file
	if _, ok := findProblem(c.Check(), "nats.embedded.data_dir", ""); !ok {
		t.Errorf("nats.embedded.data_dir %s is a regular file: config check finds nothing (serve: 'create data_dir: mkdir %s: not a directory'); problems: %v", file, file, c.Check())
	}
}
