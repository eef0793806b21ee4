package jetstream

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A lost connection's warning says what its loss stops, as its caller
// put it (ConnectOptions.Lost), and nothing more without it.
func TestDisconnectWarningSaysWhatStops(t *testing.T) {
	for lost, want := range map[string]string{
		"this serve applies no event meanwhile": `"nats disconnected; reconnecting (this serve applies no event meanwhile)"`,
		"":                                      `"nats disconnected; reconnecting"`,
	} {
		var logged syncLog
		disconnectLogger(slog.New(slog.NewJSONHandler(&logged, nil)), "c", lost)(&nats.Conn{}, nil)
		if !strings.Contains(logged.String(), want) {
			t.Errorf("lost %q: %s; want %s", lost, logged.String(), want)
		}
	}
}

// A token written in the URL (nats://TOKEN@host, the way to an external
// cluster with token auth) stays out of the reconnect line: nats.go's
// ConnectedUrlRedacted masks only a password, so the token was logged at
// info on every reconnect (a security audit, stop 38).
func TestReconnectLineCarriesNoToken(t *testing.T) {
	const token = "S3CRET0TOKEN0IN0URL"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &tcpServer{opts: EmbeddedOptions{DataDir: t.TempDir(), Listen: addr, Token: token, MaxPayload: 4 << 20}}
	if err := s.restart(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.shutdown)
	var logged syncLog
	c, err := Connect(ConnectOptions{Name: "c", URL: "nats://" + token + "@" + addr, Log: slog.New(slog.NewJSONHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s.shutdown()
	if err := s.restart(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); !strings.Contains(logged.String(), "nats reconnected"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no reconnect logged within 30 s: %s", logged.String())
		}
	}
	if out := logged.String(); strings.Contains(out, token) || !strings.Contains(out, addr) {
		t.Fatalf("log %s: want the server's address %s and not the token", out, addr)
	}
}
