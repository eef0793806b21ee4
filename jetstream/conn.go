package jetstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// ConnectOptions says how to reach JetStream.
type ConnectOptions struct {
	Name        string    // connection name shown by the server
	Embedded    *Embedded // non-nil: connect in-process to it
	URL         string    // external: "nats://h1:4222,nats://h2:4222"
	Credentials string    // external: .creds file
	Token       string    // external or listening embedded server
	// External: PEM files for TLS (all optional). CAFile replaces the
	// system's roots in verifying the servers; CertFile and KeyFile are
	// the client's certificate for servers that verify clients. Any of
	// them requires TLS of the servers.
	CAFile, CertFile, KeyFile string
	// APITimeout bounds each JetStream API call and publish ack wait.
	APITimeout time.Duration
	// Log (nil: none) gets the connection's asynchronous errors: a
	// subscription that dropped messages ("slow consumer"), a permission
	// refused. nats.go reports them nowhere else.
	Log *slog.Logger
	// Lost says what the connection's loss stops, in its disconnect
	// warning ("": nothing said).
	Lost string
}

// Conn is a connection with its JetStream context. Safe for concurrent use.
type Conn struct {
	NC *nats.Conn
	JS js.JetStream

	embedded *Embedded // nil for an external server
}

// StoreFailure returns the embedded server's lasting write error
// (ErrStoreWrite, see Embedded.WriteError), nil when there is none or the
// server is external (a cluster's write errors come back as answers).
func (c *Conn) StoreFailure() error {
	if c == nil {
		return nil
	}
	return c.embedded.WriteError()
}

// Connect dials NATS and keeps reconnecting forever in the background, so
// a cluster that comes back is used again without a restart. The first
// dial must succeed.
func Connect(o ConnectOptions) (*Conn, error) {
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		// A server that refuses the credentials twice in a row would end
		// the connection for good (nats.go's default), though the right
		// ones come back (a rotation where the servers change first):
		// serve answered 503 "reconnecting" until restarted (review AQ).
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, 500*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		// Buffer nothing while disconnected: a publish must fail fast so
		// the gateway can answer 503 instead of holding the sender.
		nats.ReconnectBufSize(-1),
		// The connect (and each reconnect's handshake) holds the connection's
		// lock while it waits: a publish whose deadline passed needs that
		// lock to return, so against a server that hangs (SIGSTOP) its 503
		// came up to this long late (audit 42: 5 s, with 5 s here).
		nats.Timeout(2 * time.Second),
		// A server that stops answering without closing the connection (its
		// host hangs, a network partition) is noticed only by pings: at
		// nats.go's default (every 2 minutes, stale after two unanswered)
		// the gateway answered 503 for minutes before moving to another
		// node. Every 5 s, stale after two: 10-15 s.
		nats.ErrorHandler(asyncErrorLogger(o.Log, o.Name)),
		// An outage is in the log from its start, not only in /metrics and
		// /readyz: a gateway with no traffic (at night) logged nothing for
		// as long as NATS was away (review AO).
		nats.DisconnectErrHandler(disconnectLogger(o.Log, o.Name, o.Lost)),
		nats.ReconnectHandler(reconnectLogger(o.Log, o.Name)),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(2),
	}
	url := o.URL
	switch {
	case o.Embedded != nil:
		opts = append(opts, nats.InProcessServer(o.Embedded.Server()), nats.Token(o.Embedded.Token()))
		url = ""
	case o.URL == "":
		return nil, errors.New("no NATS url and no embedded server")
	}
	if o.Credentials != "" {
		opts = append(opts, nats.UserCredentials(o.Credentials))
	}
	if o.Token != "" && o.Embedded == nil {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.Embedded == nil {
		if o.CAFile != "" {
			opts = append(opts, nats.RootCAs(o.CAFile))
		}
		if o.CertFile != "" || o.KeyFile != "" {
			opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
		}
	}
	nc, err := nats.Connect(url, opts...)
	usesTLS := o.CAFile != "" || o.CertFile != "" || strings.Contains(url, "tls://")
	if err != nil && o.Embedded == nil && usesTLS && !tlsFailure(err) && strings.Contains(url, ",") {
		// nats.go reports the last server's error only, trying them in
		// random order: a TLS refusal by one node was hidden behind
		// another node's "connection refused" (review D3). Ask each.
		err = tlsRefusalOf(url, opts, err)
	}
	if err != nil {
		var op *net.OpError
		switch {
		case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
			err = fmt.Errorf("%w: %w", ErrAuthorization, err)
		case tlsFailure(err):
			// Before the net.OpError case: a server refusing the client's
			// certificate answers with a TLS alert, read as an OpError.
			err = fmt.Errorf("%w: %w", ErrTLS, err)
		case errors.As(err, &op) || errors.Is(err, nats.ErrNoServers) || strings.Contains(err.Error(), "connection refused") ||
			errors.Is(err, io.EOF): // closed mid-handshake: a node going down (a reset is an OpError)
			err = fmt.Errorf("%w: %w", ErrNoServer, err)
		}
		return nil, fmt.Errorf("%w: %w: %w", errConnect, ErrUnavailable, err)
	}
	timeout := o.APITimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	jsc, err := js.New(nc, js.WithDefaultTimeout(timeout))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Conn{NC: nc, JS: jsc, embedded: o.Embedded}, nil
}

// pingInterval is how often the client pings the server (see Connect).
const pingInterval = 5 * time.Second

// tlsFailure reports whether a connect error is the TLS handshake's: the
// server's certificate not verified, or the server's alert (a client
// certificate required or not trusted), or nats.go's own TLS errors (the
// server closing the connection right after the handshake, as it does
// when it refuses the client's certificate under TLS 1.3).
func tlsFailure(err error) bool {
	var op *net.OpError
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var hostname x509.HostnameError
	var ne net.Error
	switch {
	case errors.As(err, &op) && op.Op == "remote error":
		return true
	case errors.As(err, &unknown), errors.As(err, &verify), errors.As(err, &hostname):
		return true
	case errors.Is(err, nats.ErrSecureConnWanted), errors.Is(err, nats.ErrSecureConnRequired):
		return true // nats.tls set for a server without TLS, or the reverse
	case strings.Contains(err.Error(), "closed by remote after TLS handshake"):
		return true // TLS 1.3: the server refused the client's certificate
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		// nats.go calls every handshake error a "tls error": a node that
		// hangs, closes or resets the connection mid-handshake is not
		// answering, not refusing (review D3: serve stopped at start
		// instead of waiting).
		return false
	}
	return strings.Contains(err.Error(), "tls error")
}

// tlsRefusalOf connects to each server of url alone and returns the first
// TLS failure (see tlsFailure) among them, else err.
func tlsRefusalOf(url string, opts []nats.Option, err error) error {
	for u := range strings.SplitSeq(url, ",") {
		nc, e := nats.Connect(strings.TrimSpace(u), opts...)
		if e == nil {
			nc.Close()
			continue
		}
		if tlsFailure(e) {
			return e
		}
	}
	return err
}

// errConnect marks Connect's errors (see NotAnswering).
var errConnect = errors.New("connect to NATS")

// Refusal returns the server's refusal of a request on this connection (a
// permissions violation: the user may not use the JetStream API, say) as
// an ErrAuthorization naming it, or nil. The server answers such a request
// with an error the request itself never sees (it times out), so a caller
// whose requests time out asks here why.
func (c *Conn) Refusal() error {
	if le := c.NC.LastError(); le != nil && errors.Is(le, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w: %v", ErrAuthorization, le)
	}
	return nil
}

// Close drains nothing: in-flight requests were finished by the caller.
func (c *Conn) Close() { c.NC.Close() }

// disconnectLogger logs a lost connection once per outage (nats.go calls
// it when the connection drops, not per reconnect attempt), with what its
// loss stops (lost, in parentheses, when not empty); a Close's is the
// process stopping, not worth a warning.
func disconnectLogger(log *slog.Logger, conn, lost string) nats.ConnErrHandler {
	msg := "nats disconnected; reconnecting"
	if lost != "" {
		msg += " (" + lost + ")"
	}
	return func(nc *nats.Conn, err error) {
		if log == nil || nc.IsClosed() {
			return
		}
		attrs := []any{slog.String("connection", conn)}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		log.Warn(msg, attrs...)
	}
}

func reconnectLogger(log *slog.Logger, conn string) nats.ConnHandler {
	return func(nc *nats.Conn) {
		if log == nil {
			return
		}
		// The server's address only: ConnectedUrlRedacted masks a
		// password but not a token written as nats://TOKEN@host.
		log.Info("nats reconnected", slog.String("connection", conn), slog.String("server", nc.ConnectedAddr()))
	}
}

// Connected returns ErrNotConnected while the connection is down and
// reconnecting (or closed), nil while it is up.
func (c *Conn) Connected() error {
	if c.NC.IsConnected() {
		return nil
	}
	return notConnected{c.NC.LastError()}
}

// authLogEvery bounds the warnings of a server refusing the credentials:
// reconnecting forever (IgnoreAuthErrorAbort), each attempt's refusal is an
// asynchronous error, about four a second (review AR).
const authLogEvery = time.Minute

// asyncErrorLogger logs a connection's asynchronous errors at warn, with
// the subscription's subject when there is one; refused credentials at
// most once per authLogEvery, with how many it stands for.
func asyncErrorLogger(log *slog.Logger, conn string) nats.ErrHandler {
	var (
		mu       sync.Mutex
		lastAuth time.Time
		held     int
	)
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if log == nil {
			return
		}
		attrs := []any{slog.String("connection", conn), slog.String("error", err.Error())}
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
			mu.Lock()
			if time.Since(lastAuth) < authLogEvery {
				held++
				mu.Unlock()
				return
			}
			lastAuth, attrs = time.Now(), append(attrs, slog.Int("refusals_since_last_line", held))
			held = 0
			mu.Unlock()
			log.Warn("nats refuses the credentials; reconnecting (nats.credentials or the token)", attrs...)
			return
		}
		if sub != nil {
			attrs = append(attrs, slog.String("subject", sub.Subject))
			// Which kind of subscription dropped, and how many so far: a
			// channel's (the consumer's pull inbox, a stream read) or a
			// callback's (nats.go's request replies, an answerer). A CI
			// run's drop right after a consumer takeover could not be
			// placed without it.
			if n, _, perr := sub.Pending(); errors.Is(perr, nats.ErrTypeSubscription) {
				attrs = append(attrs, slog.String("subscription", "channel"))
			} else if perr == nil {
				attrs = append(attrs, slog.String("subscription", "callback"), slog.Int("pending", n))
			}
			if d, derr := sub.Dropped(); derr == nil {
				attrs = append(attrs, slog.Int("dropped", d))
			}
		}
		log.Warn("nats asynchronous error", attrs...)
	}
}
