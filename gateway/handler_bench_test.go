package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/gateway"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/prometheus/client_golang/prometheus"
)

// storeless answers every publish as stored without storing anything: it
// isolates the handler's own cost (verify, key, headers, answer, metrics,
// audit record) from JetStream's in BenchmarkHandler.
type storeless struct{ seq atomic.Uint64 }

func (s *storeless) Publish(context.Context, jetstream.Message) (jetstream.PublishResult, error) {
	return jetstream.PublishResult{Seq: s.seq.Add(1)}, nil
}

type nopAudit struct{}

func (nopAudit) Record(event.AuditRecord) {}

// BenchmarkHandler is the webhook handler path per request, 1 KB signed
// hmac-sha256 bodies with a json id (the bench's main configuration),
// called through ServeHTTP without a network. "store=jetstream" publishes
// to a real embedded JetStream; "store=none" leaves the store out, so its
// allocs/op are hookgate's own. Run with -benchmem (make bench-micro).
func BenchmarkHandler(b *testing.B) {
	yaml := `
providers:
  p:
    signature: { scheme: hmac-sha256, header: X-Sig, secrets: ["` + testSecret + `"] }
    event_id: ["json:/id"]
    subject: "json:/grant_id"
    occurred_at: "json:/occurred_at"
    type: "json:/type"
`
	cfg, err := config.Parse([]byte(yaml), b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	sch, err := gateway.NewScheme("hmac-sha256", gateway.SchemeOptions{Header: "X-Sig"})
	if err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("x", 1024)
	body := func(i int) []byte {
		s := fmt.Sprintf(`{"id":"evt_%012d","grant_id":"G-%d","type":"award.made","occurred_at":"2026-11-30T10:00:00Z","pad":"`, i, i%1000)
		return []byte(s + pad[:1024-len(s)-2] + `"}`)
	}
	for _, store := range []string{"none", "jetstream"} {
		b.Run("store="+store, func(b *testing.B) {
			var pub gateway.Publisher = &storeless{}
			if store == "jetstream" {
				env := jstest.Start(b, "")
				pub = jetstream.NewPublisher(env.Conn, 5*time.Second)
			}
			reg := prometheus.NewRegistry()
			h, err := gateway.NewServer(slog.New(slog.NewJSONHandler(io.Discard, nil)), cfg, gateway.Deps{
				Publisher: pub, Audit: nopAudit{},
				Ready:    func(context.Context) error { return nil },
				Registry: reg, Gatherer: reg,
			})
			if err != nil {
				b.Fatal(err)
			}
			// Signed up front: the sender's cost is not the handler's.
			const distinct = 4096
			bodies := make([][]byte, distinct)
			headers := make([]http.Header, distinct)
			for i := range distinct {
				bodies[i] = body(i)
				if headers[i], err = sch.Sign(bodies[i], config.Secret(testSecret), "", time.Now()); err != nil {
					b.Fatal(err)
				}
				headers[i].Set("Content-Type", "application/json")
				headers[i].Set("User-Agent", "hookgate-bench")
			}
			b.ReportAllocs()
			b.SetBytes(1024)
			i := 0
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/webhooks/p", bytes.NewReader(bodies[i%distinct]))
				r.Header = headers[i%distinct]
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
				i++
			}
		})
	}
}
