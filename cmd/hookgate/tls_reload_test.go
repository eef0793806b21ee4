package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
)

// copyPair puts from's certificate and key at to's paths, dated at (the
// files' times change with every copy, as a renewal's do).
func copyPair(t *testing.T, from, to testpki.Files, at time.Time) {
	t.Helper()
	for src, dst := range map[string]string{from.ServerCert: to.ServerCert, from.ServerKey: to.ServerKey} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dst, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// leafOf is the DER of the certificate in a PEM file.
func leafOf(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	return blk.Bytes
}

// liveReloader puts first's pair at the live paths in dir, dated at, and
// returns a reloader over them that logs to logs, with those paths.
func liveReloader(t *testing.T, dir string, first testpki.Files, at time.Time, logs io.Writer) (*certReloader, testpki.Files) {
	t.Helper()
	live := testpki.Files{ServerCert: filepath.Join(dir, "live.pem"), ServerKey: filepath.Join(dir, "live-key.pem")}
	copyPair(t, first, live, at)
	r, err := newCertReloader(live.ServerCert, live.ServerKey, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// The tests' clocks start at at: the start's look was then, not at
	// the wall clock's now (else the tests depend on the day they run).
	r.lastLook.Store(at.UnixNano())
	return r, live
}

// hangLook replaces the live key with a FIFO nobody writes (a read that
// hangs, as on a hard NFS mount), starts a handshake, and returns once it
// is inside its look; the read is let go at the test's end.
func hangLook(t *testing.T, r *certReloader, live testpki.Files) {
	t.Helper()
	if err := os.Remove(live.ServerKey); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(live.ServerKey, 0o600); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() { defer close(first); _, _ = r.getCertificate(nil) }()
	t.Cleanup(func() {
		// A writer opens the FIFO and closes it: the read ends. Not
		// blocking: with no reader an open for writing would wait for
		// good. Tried until the look has ended: the look may not have
		// opened the FIFO yet when the test is over (the open then finds
		// no reader, and the look, opening it later, waited for a writer
		// for good: a test run hung here until its 20 minutes ran out).
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if w, err := os.OpenFile(live.ServerKey, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
			select {
			case <-first:
				return
			default:
			}
			if time.Now().After(end) {
				t.Error("the hung look did not end within 30 s of opening its FIFO for writing")
				return
			}
		}
	})
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if !r.look.TryLock() {
			return
		}
		r.look.Unlock()
		if time.Now().After(end) {
			t.Fatal("setup: the handshake never started its look")
		}
	}
}

// TestCertReloaderFollowsRenewals: http.tls's files renewed on disk are
// served from the next look on (before, only after a restart: a renewed
// certificate was ignored until the old one expired and every handshake
// failed); a half-written renewal keeps the previous pair, with one
// warning, until the rest of it is written.
func TestCertReloaderFollowsRenewals(t *testing.T) {
	dir := t.TempDir()
	a, b, c := testpki.Write(t, dir, "a-"), testpki.Write(t, dir, "b-"), testpki.Write(t, dir, "c-")
	day := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	r, live := liveReloader(t, dir, a, day, &logs)
	clock := day
	r.now = func() time.Time { return clock }
	served := func(what string, want testpki.Files) {
		t.Helper()
		p, err := r.getCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p.Certificate[0], leafOf(t, want.ServerCert)) {
			t.Fatalf("%s: served another certificate than %s", what, want.ServerCert)
		}
	}
	served("at start", a)

	copyPair(t, b, live, day.Add(time.Hour))
	served("within a second of the last look", a) // not looked at yet
	clock = clock.Add(2 * time.Second)
	served("after a renewal", b)
	if !strings.Contains(logs.String(), "certificate reloaded") {
		t.Errorf("no reload logged:\n%s", logs.String())
	}

	// Half written: c's certificate beside b's key.
	cert, err := os.ReadFile(c.ServerCert)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(live.ServerCert, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(live.ServerCert, day.Add(2*time.Hour), day.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clock = clock.Add(2 * time.Second)
		served("while the renewal is half written", b)
	}
	if n := strings.Count(logs.String(), "does not load"); n != 1 {
		t.Errorf("%d warnings for one half-written renewal, want 1:\n%s", n, logs.String())
	}
	copyPair(t, c, live, day.Add(3*time.Hour))
	clock = clock.Add(2 * time.Second)
	served("once the renewal is whole", c)
}

// TestServeServesARenewedCertificate: through a real serve, a connection
// made after http.tls's files were renewed gets the new certificate.
func TestServeServesARenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	a, b := testpki.Write(t, dir, "a-"), testpki.Write(t, dir, "b-")
	live := testpki.Files{ServerCert: filepath.Join(dir, "live.pem"), ServerKey: filepath.Join(dir, "live-key.pem")}
	copyPair(t, a, live, time.Now().Add(-time.Hour))
	cfgPath := filepath.Join(dir, "hookgate.yaml")
	reviewAHWrite(t, cfgPath, fmt.Sprintf("http: { listen: \"127.0.0.1:0\", tls: { cert: %q, key: %q } }\nnats: { embedded: { data_dir: ./data } }\n%s",
		live.ServerCert, live.ServerKey, review6Provider))
	s := review7Start(t, cfgPath, false)
	re := regexp.MustCompile(`listening on https://([0-9.:]+)`)
	var addr string
	for end := time.Now().Add(25 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.stdout.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(end) {
			t.Fatalf("serve not listening on https in 25 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
	leaf := func() []byte {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test compares the certificate itself
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	if !bytes.Equal(leaf(), leafOf(t, a.ServerCert)) {
		t.Fatal("serve did not serve the configured certificate")
	}
	copyPair(t, b, live, time.Now())
	for end := time.Now().Add(15 * time.Second); !bytes.Equal(leaf(), leafOf(t, b.ServerCert)); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("15 s after http.tls's files were renewed, new connections still get the old certificate")
		}
	}
	if _, err := x509.ParseCertificate(leaf()); err != nil {
		t.Fatal(err)
	}
}
