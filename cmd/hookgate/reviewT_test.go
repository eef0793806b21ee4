package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Review T: serve's wait for an external NATS (openStore, NotAnswering).

const reviewTWarn = `"msg":"event store not answering; trying again"`

// reviewTServe writes a gateway-only config with nats.url (and extra
// nats keys) and starts serve on it.
func reviewTServe(t *testing.T, natsYAML string) *review7Serve {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\nnats: { %s }\n%s", natsYAML, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return review7Start(t, path, false)
}

// reviewTExpectEnds: a refusal must end serve (an error, not a wait). It
// fails as soon as serve logs that it will try again.
func reviewTExpectEnds(t *testing.T, s *review7Serve, within time.Duration) error {
	t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-s.done:
			s.done <- err
			if err == nil {
				t.Fatalf("serve returned nil, want the refusal\n%s", tail(s.stderr.String(), 2000))
			}
			return err
		default:
		}
		if log := s.stderr.String(); strings.Contains(log, reviewTWarn) {
			i := strings.Index(log, reviewTWarn)
			line := log[strings.LastIndex(log[:i], "\n")+1:]
			if j := strings.Index(line, "\n"); j >= 0 {
				line = line[:j]
			}
			t.Fatalf("serve waits out a refusal that cannot pass by itself (it will retry forever):\n%s", line)
		}
		if time.Now().After(end) {
			t.Fatalf("serve neither ended nor retried within %s\n%s", within, tail(s.stderr.String(), 2000))
		}
	}
}

// A tls:// nats.url to a server that offers no TLS: nats.go says "secure
// connection not available" at once; a config mistake, retried forever.
func TestReviewTServeEndsOnTLSNotOffered(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{Authorization: "tok"})
	s := reviewTServe(t, fmt.Sprintf("url: \"tls://tok@%s\"", srv.Addr().String()))
	reviewTExpectEnds(t, s, 20*time.Second)
}

// A tls:// nats.url to a server whose certificate the system roots do not
// trust (a private CA; hookgate has no nats CA setting): x509 "unknown
// authority", retried forever.
func TestReviewTServeEndsOnUntrustedNATSCert(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{Authorization: "tok", TLS: true, TLSConfig: reviewTSelfSigned(t)})
	s := reviewTServe(t, fmt.Sprintf("url: \"tls://tok@%s\"", srv.Addr().String()))
	reviewTExpectEnds(t, s, 20*time.Second)
}

// nats.credentials naming a file that is not a .creds file (config check
// only stats it): nats.go fails signing the nonce, before any server
// answer; retried forever.
func TestReviewTServeEndsOnMalformedCredentialsFile(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{})
	creds := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(creds, []byte("not a creds file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := reviewTServe(t, fmt.Sprintf("url: \"nats://%s\", credentials: %q", srv.Addr().String(), creds))
	reviewTExpectEnds(t, s, 20*time.Second)
}

// A user the server denies $JS.API: the server refuses every JetStream
// request (-ERR Permissions Violation), the client sees timeouts; before
// this commit serve ended after 30 s, now it waits forever (README:
// "Credentials the server refuses ... still end serve at once").
func TestReviewTServeEndsOnJetStreamPermissionDenied(t *testing.T) {
	t.Parallel()
	srv := reviewTNATS(t, &server.Options{
		JetStream: true, StoreDir: t.TempDir(),
		Users: []*server.User{{Username: "hg", Password: "s3cretpw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.>"}},
		}}},
	})
	s := reviewTServe(t, fmt.Sprintf("url: \"nats://hg:s3cretpw@%s\"", srv.Addr().String()))
	err := reviewTExpectEnds(t, s, 60*time.Second)
	if msg := err.Error(); !strings.Contains(msg, "permissions violation") || !strings.Contains(msg, "credentials") || strings.Contains(msg, "s3cretpw") {
		t.Fatalf("serve ended with %q; want the refusal named (credentials, permissions violation), without the password", msg)
	}
}

// A NATS server without JetStream: every request gets "no responders" at
// once (nats.go's own AccountInfo calls that ErrJetStreamNotEnabled).
// Before this commit serve ended after 30 s; now it waits forever.
func TestReviewTServeEndsOnNATSWithoutJetStream(t *testing.T) {
	t.Parallel()
	s := reviewTServe(t, fmt.Sprintf("url: %q", review10aNoJetStream(t)))
	reviewTExpectEnds(t, s, 60*time.Second)
}

// SIGTERM while an attempt dials servers that accept TCP but never speak
// (a hung server, a proxy in front of a down one): Connect ignores ctx
// and gives each server its 5 s timeout, so the stop waits for all of
// them (15 s for three) instead of being prompt.
func TestReviewTStopDuringConnectAttemptIsPrompt(t *testing.T) {
	var addrs []string
	accepted := make(chan struct{}, 16)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		addrs = append(addrs, "nats://"+ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				go io.Copy(io.Discard, c)
				select {
				case accepted <- struct{}{}:
				default:
				}
			}
		}()
	}
	s := reviewTServe(t, fmt.Sprintf("url: %q", strings.Join(addrs, ",")))
	select {
	case <-accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("serve never dialled")
	}
	t0 := time.Now()
	err := s.stop(t)
	d := time.Since(t0)
	if err != nil {
		t.Errorf("SIGTERM during a connect attempt: %v (exit %d), want a clean stop", err, exitCode(err, io.Discard))
	}
	if d > 3*time.Second {
		t.Errorf("SIGTERM during a connect attempt: serve took %s to stop, want it prompt", d.Round(time.Millisecond))
	}
}

func reviewTNATS(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	o.Host, o.Port, o.NoSigs, o.NoLog, o.MaxPayload = "127.0.0.1", server.RANDOM_PORT, true, true, 4<<20
	srv, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return srv
}

func reviewTSelfSigned(t *testing.T) *tls.Config {
	t.Helper()
	certPath, keyPath := review9gServerCert(t)
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}
