package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hookgate/hookgate/internal/testpki"
)

// nats.tls: the files of TLS to an external cluster, checked like
// http.tls's, and resolved against the config file's directory.
func TestNATSTLSChecks(t *testing.T) {
	dir := t.TempDir()
	pki := testpki.Write(t, dir, "")
	other := testpki.Write(t, dir, "other-")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	const url = "tls://127.0.0.1:4222"
	tests := []struct {
		name    string
		url     string
		tls     NATSTLS
		key     string
		msg     string
		warning bool
	}{
		{"cert only", url, NATSTLS{Cert: pki.ClientCert}, "nats.tls.key", "required when nats.tls.cert is set", false},
		{"key only", url, NATSTLS{Key: pki.ClientKey}, "nats.tls.cert", "required when nats.tls.key is set", false},
		{"cert missing", url, NATSTLS{Cert: missing, Key: pki.ClientKey}, "nats.tls.cert", "no such file", false},
		{"key of another cert", url, NATSTLS{Cert: pki.ClientCert, Key: other.ClientKey}, "nats.tls.cert", "with nats.tls.key: tls: private key does not match public key", false},
		{"ca missing", url, NATSTLS{CA: missing}, "nats.tls.ca", "no such file", false},
		{"ca directory", url, NATSTLS{CA: dir}, "nats.tls.ca", "is a directory", false},
		{"ca not pem", url, NATSTLS{CA: notPEM}, "nats.tls.ca", "holds no PEM certificate", false},
		{"without url", "", NATSTLS{CA: pki.CA}, "nats.tls", "ignored: it is for an external cluster and nats.url is empty", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, baseYAML, nil)
			c.NATS.URL, c.NATS.TLS = tt.url, tt.tls
			ps := c.Check()
			wantProblem(t, ps, tt.key, tt.msg, tt.warning)
			if err := c.Validate(); (err == nil) != tt.warning {
				t.Errorf("Validate() = %v; want an error: %v", err, !tt.warning)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		for _, ok := range []NATSTLS{{CA: pki.CA}, {Cert: pki.ClientCert, Key: pki.ClientKey}, {CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}} {
			c := mustParse(t, baseYAML, nil)
			c.NATS.URL, c.NATS.TLS = url, ok
			if ps := c.Check(); len(ps) != 0 {
				t.Errorf("Check() with %+v =\n%v\nwant nothing", ok, ps)
			}
		}
	})
}

func TestNATSTLSPathsResolveAgainstTheConfigsDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	testpki.Write(t, filepath.Join(dir, "pki"), "")
	path := filepath.Join(dir, "hookgate.yaml")
	cfg := baseYAML + `
nats:
  url: tls://127.0.0.1:4222
  tls: { ca: pki/ca.pem, cert: pki/client.pem, key: pki/client-key.pem }
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // not where the files are
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := NATSTLS{
		CA:   filepath.Join(dir, "pki", "ca.pem"),
		Cert: filepath.Join(dir, "pki", "client.pem"),
		Key:  filepath.Join(dir, "pki", "client-key.pem"),
	}
	if c.NATS.TLS != want {
		t.Errorf("nats.tls = %+v, want %+v", c.NATS.TLS, want)
	}
	if ps := c.Check(); len(ps) != 0 {
		t.Errorf("Check() =\n%v\nwant nothing", ps)
	}
}
