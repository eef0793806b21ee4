package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A stop that starts again in place must answer a connection its server
// accepted just before the stop, whose request comes after the stop
// began: Go's server closes such a connection without an answer once its
// Shutdown began, and a liveness probe saw EOF while serve started again
// (a CI run's TestReviewRHealthzAnswersThroughStartAgain, once in many).
// Here the moment is made: the connection is accepted (the server tracks
// it) and sends its request only once the accept loop has ended.
func TestSettleAnswersAcceptedConnections(t *testing.T) {
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ln := newKeptListener(tcp, tcp.Addr().String())
	ln.keep.Store(true)
	t.Cleanup(func() { _ = tcp.Close() })
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }),
		ConnState: ln.connState,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	c, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitUntil(t, "the connection accepted and tracked", func() bool { return ln.fresh.Load() == 1 })

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		settleAll([]listener{{srv: srv, ln: ln}}, time.Now().Add(5*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	select {
	case <-ln.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the accept loop did not end")
	}
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Errorf("the accepted connection's request got %q, %v; want HTTP/1.1 200", line, err)
	}
	<-stopped
	if err := <-served; !strings.Contains(err.Error(), "closed") {
		t.Errorf("Serve returned %v", err)
	}
	// The socket stays open for the next run.
	c2, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatalf("the kept socket was closed: %v", err)
	}
	_ = c2.Close()
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
