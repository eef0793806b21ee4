package consumer_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// A receiver's refusal says why it refused: the dead letter keeps an
// excerpt of it (Hookgate-Dlq-Response, `dlq show`, `trace`), and the
// AUDIT record and its reason do not (AUDIT is undeletable, and an answer
// may echo the payload).
func TestDeadLetterKeepsTheReceiversAnswer(t *testing.T) {
	env := jstest.Start(t, "")
	audit := &auditLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"applicant jane@example.org has no grant G-1"}`)
	}))
	t.Cleanup(srv.Close)
	fwd, err := consumer.NewForward(consumer.ForwardOptions{URL: srv.URL + "/hook", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store(t, env, ev{"k-400", "G-1", "2026-11-30T10:00:00Z", "a"})
	start(t, env, newProcessor(env, "a", true, audit, fwd), 1)
	waitSettled(t, env)
	recs := audit.of("k-400", event.DecisionDeadLettered)
	if len(recs) != 1 {
		t.Fatalf("setup: %d dead-lettered records for k-400, want 1", len(recs))
	}
	if strings.Contains(recs[0].Reason, "jane") {
		t.Fatalf("AUDIT reason %q carries the receiver's answer", recs[0].Reason)
	}
	s, err := env.Conn.JS.Stream(t.Context(), jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Header.Get(event.HeaderDlqResponse), `{"error":"applicant jane@example.org has no grant G-1"}`; got != want {
		t.Fatalf("letter %s = %q, want %q", event.HeaderDlqResponse, got, want)
	}
	if r := m.Header.Get(event.HeaderDlqReason); !strings.Contains(r, "400") || strings.Contains(r, "jane") {
		t.Fatalf("letter reason %q: want the status, not the answer", r)
	}
}
