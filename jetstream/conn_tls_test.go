package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// An external server with TLS from a private CA that verifies clients
// (mutual TLS): Connect reaches it with nats.tls's files, and without
// them fails with an error that is not "try again later" (serve then
// stops with the reason instead of waiting).
func TestConnectTLSWithPrivateCAAndClientCert(t *testing.T) {
	dir := t.TempDir()
	pki := testpki.Write(t, dir, "")
	other := testpki.Write(t, dir, "other-")
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CaFile: pki.CA, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: t.TempDir(),
		TLSConfig: tc, TLS: true, TLSVerify: true, TLSTimeout: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	url := "tls://" + srv.Addr().String()

	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: url, CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey})
	if err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.JS.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream over TLS: %v", err)
	}
	if !c.NC.TLSRequired() {
		t.Error("the connection does not say TLS")
	}
	c.Close()

	for _, tt := range []struct {
		name string
		o    jetstream.ConnectOptions
		want string
	}{
		{"system roots only", jetstream.ConnectOptions{CertFile: pki.ClientCert, KeyFile: pki.ClientKey}, "certificate signed by unknown authority"},
		{"another CA", jetstream.ConnectOptions{CAFile: other.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}, "certificate signed by unknown authority"},
		{"no client certificate", jetstream.ConnectOptions{CAFile: pki.CA}, ""},
		{"a client certificate of another CA", jetstream.ConnectOptions{CAFile: pki.CA, CertFile: other.ClientCert, KeyFile: other.ClientKey}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Name, tt.o.URL = "test", url
			c, err := jetstream.Connect(tt.o)
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v; want it to say %q", err, tt.want)
			}
			if !errors.Is(err, jetstream.ErrTLS) || errors.Is(err, jetstream.ErrNoServer) || jetstream.NotAnswering(err) {
				t.Errorf("%v: want ErrTLS, a lasting error (not ErrNoServer, not NotAnswering)", err)
			}
			t.Logf("%v", err)
		})
	}
}
