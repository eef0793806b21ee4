package jetstream_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

func startServerD3(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	o.Host, o.Port, o.NoSigs, o.NoLog = "127.0.0.1", -1, true, true
	srv, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return srv
}

// closedAddrD3 is an address where nothing listens (a node that is down).
func closedAddrD3(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

// A cluster of two where one node is down and the other refuses the
// client (no client certificate under mutual TLS): the refusal is the
// only answer, so Connect should say ErrTLS every time. nats.go tries
// the servers in random order, and a "connection refused" after the TLS
// failure clears it (nats.go connect: err = nil, then ErrNoServers), so
// a share of the attempts say ErrNoServer: serve logs "not answering;
// trying again" and retries (1-10 s apart) until an attempt happens to
// end on the TLS node; a CLI command (one attempt) says "no nats server
// answered" instead of naming nats.tls.
func TestReviewD3TLSRefusedWithOneNodeDownIsErrTLS(t *testing.T) {
	dir := t.TempDir()
	pki := testpki.Write(t, dir, "")
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CaFile: pki.CA, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServerD3(t, &server.Options{TLSConfig: tc, TLS: true, TLSVerify: true, TLSTimeout: 2})
	url := "tls://" + srv.Addr().String() + ",tls://" + closedAddrD3(t)
	noServer := 0
	for i := 0; i < 40; i++ {
		c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: url, CAFile: pki.CA})
		if err == nil {
			c.Close()
			t.Fatal("connected without a client certificate")
		}
		if !errors.Is(err, jetstream.ErrTLS) {
			noServer++
			t.Logf("attempt %d: %v (ErrNoServer %v, NotAnswering %v)", i, err, errors.Is(err, jetstream.ErrNoServer), jetstream.NotAnswering(err))
		}
	}
	if noServer > 0 {
		t.Errorf("%d of 40 connects not classified ErrTLS: taken for a server not answering instead of naming nats.tls", noServer)
	}
}

// nats.tls set (a private CA) with a nats:// URL, against a server that
// offers no TLS: the connect fails on TLS ("secure connection not
// available"), which nats.tls should be named for (ErrTLS), as for any
// other TLS mismatch.
func TestReviewD3NATSTLSAgainstPlainServerIsErrTLS(t *testing.T) {
	dir := t.TempDir()
	pki := testpki.Write(t, dir, "")
	srv := startServerD3(t, &server.Options{})
	for _, url := range []string{"nats://" + srv.Addr().String(), "tls://" + srv.Addr().String()} {
		c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: url, CAFile: pki.CA})
		if err == nil {
			c.Close()
			t.Errorf("%s: connected in the clear although nats.tls.ca is set", url)
			continue
		}
		if !errors.Is(err, jetstream.ErrTLS) {
			t.Errorf("%s: %v: want ErrTLS (NotAnswering %v)", url, err, jetstream.NotAnswering(err))
		}
	}
}
