package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// roomToWrite writes its probe and leaves nothing behind; a data_dir it
// cannot write in is named in the reason.
func TestRoomToWrite(t *testing.T) {
	dir := t.TempDir()
	if err := roomToWrite(dir); err != nil {
		t.Fatalf("an empty temp dir: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the probe left %v behind", left)
	}
	missing := filepath.Join(dir, "gone")
	if err := roomToWrite(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a missing dir: %v, want an error naming it", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		if err := roomToWrite(ro); err == nil || !strings.Contains(err.Error(), "probe file in "+ro) {
			t.Fatalf("a read-only dir: %v, want the probe's failure", err)
		}
	}
}

// Starts again in a row wait 5 s, 10 s, 20 s ... 5 minutes after the last;
// a calm spell starts a new row.
func TestRestartPace(t *testing.T) {
	var p restartPace
	if !p.notBefore().IsZero() {
		t.Fatalf("before any start again: %v, want no wait", p.notBefore())
	}
	at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	var got []time.Duration
	for range 9 {
		p.started(at)
		got = append(got, p.notBefore().Sub(at))
		at = p.notBefore() // the store failed again at once
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	p.started(at.Add(restartCalm))
	if d := p.notBefore().Sub(at.Add(restartCalm)); d != 5*time.Second {
		t.Fatalf("after a calm spell: %v, want 5s", d)
	}
}

// What a start again carries: a socket the next run's config still names
// is handed over open; one it no longer names is closed (dials refused),
// not left to queue connections nobody serves.
func TestCarriedSockets(t *testing.T) {
	listen := func() *net.TCPListener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l.(*net.TCPListener)
	}
	kept, dropped := listen(), listen()
	c := carried{sockets: map[string]*net.TCPListener{"a": kept, "b": dropped}}
	if got := c.takeSocket("a"); got != kept {
		t.Fatalf("takeSocket(a) = %v, want the carried socket", got)
	}
	if c.takeSocket("a") != nil || c.takeSocket("x") != nil {
		t.Fatal("a socket handed over twice, or one never carried")
	}
	c.closeSockets()
	if conn, err := net.DialTimeout("tcp", dropped.Addr().String(), time.Second); err == nil {
		conn.Close()
		t.Fatal("a carried socket no run took still accepts connections")
	}
	conn, err := net.DialTimeout("tcp", kept.Addr().String(), time.Second)
	if err != nil {
		t.Fatalf("the socket handed over was closed: %v", err)
	}
	conn.Close()
	kept.Close()
}
