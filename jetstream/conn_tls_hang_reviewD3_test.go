package jetstream_test

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/testpki"
	"github.com/hookgate/hookgate/jetstream"
)

// fakeTLSNode accepts connections, sends a NATS INFO that requires TLS,
// then (hang) stops answering, as a node that freezes or is overloaded
// right after the INFO, or (close) closes the connection, as a node that
// is going down in a rolling restart.
func fakeTLSNode(t *testing.T, hang bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		<-done // the accept loop has ended: held is only ours now
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(`INFO {"server_id":"FAKE","version":"2.11.0","go":"go1","host":"127.0.0.1","port":4222,"max_payload":1048576,"proto":1,"tls_required":true}` + "\r\n"))
			if hang {
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			} else {
				c.Close()
			}
		}
	}()
	return l.Addr().String()
}

// A node that does not complete the TLS handshake because it stopped
// answering or went away is a server not answering (serve waits for it,
// as it does for the same node without TLS), not a TLS configuration
// error: nats.go wraps every handshake error in "nats: tls error", and
// jetstream.tlsFailure takes that string for ErrTLS, so serve stops at
// start naming nats.tls (whose files are fine).
func TestReviewD3TLSHandshakeTimeoutOrEOFIsNotErrTLS(t *testing.T) {
	pki := testpki.Write(t, t.TempDir(), "")
	for _, tt := range []struct {
		name string
		hang bool
	}{{"hangs after INFO", true}, {"closes after INFO", false}} {
		t.Run(tt.name, func(t *testing.T) {
			url := "tls://" + fakeTLSNode(t, tt.hang)
			start := time.Now()
			c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: url, CAFile: pki.CA})
			if err == nil {
				c.Close()
				t.Fatal("connected to a fake node")
			}
			t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
			if errors.Is(err, jetstream.ErrTLS) || !jetstream.NotAnswering(err) {
				t.Errorf("ErrTLS %v, NotAnswering %v: want a server not answering (serve waits), not ErrTLS (serve stops naming nats.tls)",
					errors.Is(err, jetstream.ErrTLS), jetstream.NotAnswering(err))
			}
		})
	}
}
