package jetstream_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/jetstream"
)

// A busy nats.embedded.listen address is a user error, named as such (the
// server, logging nothing, only failed to become ready after 30 s).
func TestEmbeddedListenAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: dir, Listen: ln.Addr().String(), MaxPayload: 1 << 20})
	if err == nil {
		e.Shutdown()
		t.Fatal("started on a busy address")
	}
	if !strings.Contains(err.Error(), "nats.embedded.listen "+ln.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("%v; want an error naming nats.embedded.listen, the address and the cause", err)
	}
	// The data_dir lock was released: a start without the address works.
	e, err = jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: dir, MaxPayload: 1 << 20})
	if err != nil {
		t.Fatalf("after the failed start: %v", err)
	}
	e.Shutdown()
}

// Connect tells a refused token from an address where nothing listens (the
// CLI answers the first "check the token" and opens data_dir itself on the
// second).
func TestConnectErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: "nats://" + addr, Token: "x"})
	if !errors.Is(err, jetstream.ErrNoServer) || !errors.Is(err, jetstream.ErrUnavailable) || errors.Is(err, jetstream.ErrAuthorization) {
		t.Fatalf("nothing listening: %v; want ErrNoServer and ErrUnavailable", err)
	}
	e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: t.TempDir(), Listen: addr, Token: "right", MaxPayload: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	_, err = jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: "nats://" + addr, Token: "wrong"})
	if !errors.Is(err, jetstream.ErrAuthorization) || errors.Is(err, jetstream.ErrNoServer) {
		t.Fatalf("wrong token: %v; want ErrAuthorization", err)
	}
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: "nats://" + addr, Token: "right"})
	if err != nil {
		t.Fatalf("right token: %v", err)
	}
	c.Close()
}

// A token file open to other users is warned about at start (the token
// allows everything on the embedded server; one made by hand is used as
// it is), and hookgate's own 0600 file is not.
func TestTokenFileOpenToOthersIsWarned(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o640, true}, {0o600, false}} {
		dir := t.TempDir()
		path := filepath.Join(dir, jetstream.TokenFile)
		if err := os.WriteFile(path, []byte("0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		var logged bytes.Buffer
		e, err := jetstream.StartEmbedded(jetstream.EmbeddedOptions{DataDir: dir, MaxPayload: 1 << 20, Log: slog.New(slog.NewJSONHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		e.Shutdown()
		if got := strings.Contains(logged.String(), "readable by other users"); got != c.warn {
			t.Errorf("mode %04o: warned %v, want %v: %s", c.mode, got, c.warn, logged.String())
		}
		if strings.Contains(logged.String(), "0123456789abcdef") {
			t.Errorf("the warning carries the token: %s", logged.String())
		}
	}
}
