package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// The floor imports nats-server and nats.go directly, not through
// hookgate's jetstream package: it is the least any gateway on JetStream
// can do, so it must not share hookgate's code (or its costs).

// floorFailedLine is what the floor prints on stopping when its consumer
// tried writes again; the harness reads it back (floorWriteFailures).
const floorFailedLine = "floor: consumer: %d writes failed (each tried again in place)"

// FloorOptions configure the floor server.
type FloorOptions struct {
	Dir     string // the JetStream store lives in Dir/jetstream
	Listen  string // HTTP address, "127.0.0.1:0" for any port
	MaxBody int64  // bytes; larger bodies get 413
	// NATSPort > 0 lets TCP clients in on 127.0.0.1:NATSPort with Token
	// (the end-to-end run reads the consumer's lag through it).
	NATSPort int
	Token    string
	// Consumer runs the floor's consumer beside the gateway when its
	// Workers > 0 (see floor_consumer.go).
	Consumer FloorConsumerOptions
}

// FloorStream is the floor's stream: WEBHOOKS' settings (file store,
// limits retention, DiscardNew, a 96 h duplicate window) under another name.
func FloorStream(maxMsg int32) js.StreamConfig {
	return js.StreamConfig{
		Name:       "FLOOR",
		Subjects:   []string{"floor.>"},
		Retention:  js.LimitsPolicy,
		Storage:    js.FileStorage,
		Discard:    js.DiscardNew,
		MaxAge:     720 * time.Hour,
		MaxBytes:   10e9,
		MaxMsgSize: maxMsg,
		Duplicates: 96 * time.Hour,
		DenyDelete: true,
		DenyPurge:  true,
		Replicas:   1,
	}
}

// StartEmbeddedServer starts an in-process JetStream server on dir, the
// way hookgate's embedded server is set up (no TCP listener unless port >
// 0, no signal handlers, no logging).
func StartEmbeddedServer(dir string, maxPayload int32, port int, token string) (*server.Server, error) {
	opts := &server.Options{
		ServerName:    "bench",
		JetStream:     true,
		StoreDir:      filepath.Join(dir, "jetstream"),
		NoSigs:        true,
		NoLog:         true,
		MaxPayload:    maxPayload,
		DontListen:    port <= 0,
		Authorization: token,
	}
	if port > 0 {
		opts.Host, opts.Port = "127.0.0.1", port
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	s.Start()
	if !s.ReadyForConnections(60 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats-server not ready within 60s")
	}
	return s, nil
}

// maxPayloadFor mirrors hookgate: body limit plus 64 KiB of headers, at
// least 1 MiB.
func maxPayloadFor(maxBody int64) int32 {
	return int32(max(maxBody+64<<10, 1<<20))
}

// RunFloor serves the floor until ctx ends: POST /webhooks/{provider}
// reads the body and publishes it with Nats-Msg-Id (the X-Event-Id header,
// else the body's sha256) to an embedded JetStream file store, answering
// 200 after the ack. GET /readyz answers 200. It prints "floor: listening
// on http://ADDR" once it accepts requests.
func RunFloor(ctx context.Context, o FloorOptions, stdout io.Writer) error {
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	ns, err := StartEmbeddedServer(o.Dir, maxPayloadFor(o.MaxBody), o.NATSPort, o.Token)
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect("", nats.InProcessServer(ns), nats.Token(o.Token))
	if err != nil {
		return err
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := j.CreateStream(cctx, FloorStream(maxPayloadFor(o.MaxBody))); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	if o.Consumer.Workers > 0 {
		stop, err := startFloorConsumer(ctx, j, maxPayloadFor(o.MaxBody), o.Consumer)
		if err != nil {
			return err
		}
		defer func() {
			if failed := stop(); failed > 0 {
				fmt.Fprintf(stdout, floorFailedLine+"\n", failed)
			}
		}()
	}

	mux := http.NewServeMux()
	// pprof costs nothing until asked; the harness profiles the floor
	// the same way it profiles the gateway.
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /webhooks/{provider}", func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > o.MaxBody {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		var buf bytes.Buffer
		if r.ContentLength > 0 {
			buf.Grow(int(r.ContentLength))
		}
		if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, o.MaxBody)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body := buf.Bytes()
		id := r.Header.Get("X-Event-Id")
		if id == "" {
			sum := sha256.Sum256(body)
			id = hex.EncodeToString(sum[:])
		}
		pctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		ack, err := j.PublishMsg(pctx, &nats.Msg{Subject: "floor.in", Data: body}, js.WithMsgID(id))
		if err != nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if ack.Duplicate {
			_, _ = io.WriteString(w, `{"status":"duplicate"}`+"\n")
			return
		}
		_, _ = io.WriteString(w, `{"status":"accepted"}`+"\n")
	})
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	fmt.Fprintf(stdout, "floor: listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	_ = srv.Shutdown(sctx)
	return nil
}
