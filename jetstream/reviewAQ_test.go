package jetstream_test

// Review AQ: HasStore's glob; the connection after credentials refused.

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// TestReviewAQHasStoreDataDirWithGlobCharacters: HasStore builds a glob
// pattern from data_dir itself, so a data_dir whose name holds a glob
// metacharacter ("/srv/hookgate[eu-1]/data", "/data/hook*gate") never
// matches its own WEBHOOKS directory: serve warns "data_dir holds no
// event store: starting a new, empty one" at every start, on a store
// that holds everything (and an operator told to check data_dir moves
// it or restores a backup). An unclosed "[" is ErrBadPattern: the same.
func TestReviewAQHasStoreDataDirWithGlobCharacters(t *testing.T) {
	for _, name := range []string{"plain", "hookgate[eu-1]", "hook*gate?", "odd[name"} {
		data := filepath.Join(t.TempDir(), name)
		// Where the embedded server keeps WEBHOOKS (StoreDir is
		// data_dir/jetstream; the server adds jetstream/<account>).
		if err := os.MkdirAll(filepath.Join(data, "jetstream", "jetstream", "$G", "streams", jetstream.StreamWebhooks), 0o700); err != nil {
			t.Fatal(err)
		}
		if !jetstream.HasStore(data) {
			t.Errorf("data_dir %q holds WEBHOOKS's directory, HasStore = false (serve warns of a new, empty store at every start)", name)
		}
	}
}

type aqLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *aqLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *aqLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestReviewAQReconnectsAfterCredentialsRefusedTwice: Connect promises
// "keeps reconnecting forever"; the new disconnect log says "reconnecting"
// and /readyz "not connected to NATS (reconnecting)". But nats.go gives
// up for good after the same server refused the credentials twice in a
// row (processAuthError, unless IgnoreAuthErrorAbort): a credentials
// rotation where the server (or account JWT) changes a moment before the
// .creds file (nats.go reads it again at each attempt) closes the
// connection. serve keeps running: /healthz 200 (no restart by a
// liveness probe), /readyz and every webhook 503 with "(reconnecting)",
// the log's last word "reconnecting", until someone restarts it, although
// the right credentials are back seconds later.
func TestReviewAQReconnectsAfterCredentialsRefusedTwice(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	start := func(token string) *server.Server {
		t.Helper()
		o := &server.Options{Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true, Authorization: token}
		srv, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatal("server not ready")
		}
		return srv
	}
	srv := start("right")
	var logs aqLog
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "aq", URL: srv.ClientURL(), Token: "right", Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// The server comes back with other credentials for a while.
	srv.Shutdown()
	srv.WaitForShutdown()
	srv = start("rotated")
	for end := time.Now().Add(15 * time.Second); !strings.Contains(strings.ToLower(logs.String()), "authorization"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("setup: no authorization refusal logged in 15 s:\n%s", logs.String())
		}
	}
	for end := time.Now().Add(15 * time.Second); strings.Count(strings.ToLower(logs.String()), "authorization") < 2 && !c.NC.IsClosed(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			break
		}
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	// The right credentials are back.
	srv = start("right")
	defer srv.Shutdown()
	for end := time.Now().Add(20 * time.Second); c.Connected() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("20 s after the server takes the credentials again, not reconnected (closed for good: %v; Connected says %q); log:\n%s",
				c.NC.IsClosed(), c.Connected(), logs.String())
		}
	}
}
