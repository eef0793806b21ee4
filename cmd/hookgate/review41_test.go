package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats.go"
)

// Review 41 (commit fd66979: serve acknowledges as already-dead-lettered
// the events its consumer reset brings back whose WEBHOOKS sequence has a
// letter in DLQ, or a dead-lettered record in AUDIT, written since the
// first event above the ack floor was stored).

// review41StoreEvent stores one event in WEBHOOKS as the gateway does and
// returns its sequence.
func review41StoreEvent(t *testing.T, c *jetstream.Conn, key string) uint64 {
	t.Helper()
	h := nats.Header{}
	h.Set(event.HeaderKey, key)
	h.Set("Hookgate-Provider", "grantsgov")
	h.Set("Hookgate-Account", "default")
	h.Set(nats.MsgIdHdr, key)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := c.JS.PublishMsg(ctx, &nats.Msg{Subject: "webhooks.grantsgov.default", Header: h, Data: []byte(`{"id":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// WEBHOOKS deleted and created again (the README's key-index section
// names the case) starts its sequences at 1 again, while DLQ keeps the
// letters of the events of the old stream, with their old
// Hookgate-Stored-Seq. An operator's `dlq replay` of such an old letter
// that fails again re-appends it now (a new letter, this moment's time,
// Hookgate-Stored-Seq = the old sequence), and writes a dead-lettered
// AUDIT record with that sequence. letteredBefore matches by sequence
// alone, never by the event's key: the new stream's event at that
// sequence, never run to the end (stored after the floor, waiting out a
// retry or not yet delivered), is then acknowledged as
// already-dead-lettered after serve's next reset. It has no letter, is
// not applied, and nothing will ever run it: an accepted event lost.
func TestReview41LetteredMatchesTheEventNotJustItsSequence(t *testing.T) {
	env := jstest.Start(t, "")
	c := env.Conn
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The old stream: event old-2 at sequence 2 is dead-lettered.
	review41StoreEvent(t, c, "grantsgov:default:evt:old-1")
	oldSeq := review41StoreEvent(t, c, "grantsgov:default:evt:old-2")
	old, err := jetstream.GetMsg(ctx, c, jetstream.StreamWebhooks, oldSeq)
	if err != nil {
		t.Fatal(err)
	}
	effects := jetstream.NewEffects(c)
	letter, err := effects.DeadLetter(ctx, jetstream.EventFromMsg(old.Header, old.Body, oldSeq), "forward: 400 Bad Request", 1)
	if err != nil {
		t.Fatal(err)
	}

	// WEBHOOKS deleted and created again; new events take sequences 1, 2.
	if err := c.JS.DeleteStream(ctx, jetstream.StreamWebhooks); err != nil {
		t.Fatal(err)
	}
	if err := jetstream.Provision(ctx, c.JS, jstest.Streams()); err != nil {
		t.Fatal(err)
	}
	from := review41StoreEvent(t, c, "grantsgov:default:evt:new-1")
	newSeq := review41StoreEvent(t, c, "grantsgov:default:evt:new-2")
	if newSeq != oldSeq {
		t.Fatalf("the new stream's second event took sequence %d, want %d", newSeq, oldSeq)
	}

	// The operator re-feeds the old letter, and it fails again: dlq
	// replay re-appends it (dlqReplayOne: letterEvent, then the
	// processor's DeadLetter).
	m, err := jetstream.ReadMsg(ctx, c, jetstream.StreamDLQ, letter)
	if err != nil {
		t.Fatal(err)
	}
	refed := letterEvent(m)
	if refed.Seq != oldSeq {
		t.Fatalf("letterEvent: seq %d, want %d", refed.Seq, oldSeq)
	}
	again, err := effects.DeadLetter(ctx, refed, "forward: 400 Bad Request", 1)
	if err != nil {
		t.Fatal(err)
	}
	if again == letter {
		t.Fatal("the re-fed letter was not re-appended")
	}

	// serve starts again; its reset's first event is new-1.
	l := &letteredBefore{}
	l.load(ctx, c, from, newSeq, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if why := l.of(newSeq, "grantsgov:default:evt:old-2"); why == "" {
		t.Fatalf("the re-fed letter %d of old-2 (stored seq %d) was not read at all", again, oldSeq)
	}
	if why := l.of(newSeq, "grantsgov:default:evt:new-2"); why != "" {
		t.Fatalf("event grantsgov:default:evt:new-2 (WEBHOOKS %d) was never dead-lettered (no letter of its key in DLQ), yet serve would acknowledge it unrun as already-dead-lettered: %q\n"+
			"(the letter %d is of grantsgov:default:evt:old-2 of the deleted stream, whose Hookgate-Stored-Seq %s is the same number)",
			newSeq, why, again, strconv.FormatUint(oldSeq, 10))
	}
}

// review41Config writes a config with the test provider forwarding to
// forward, on the embedded store in dataDir listening at natsListen.
func review41Config(t *testing.T, httpListen, dataDir, natsListen, forward, top string) string {
	t.Helper()
	provider := strings.Replace(review6Provider, `    occurred_at: "json:/at"`, `    occurred_at: "json:/at"
    effects: { forward: { url: "`+forward+`" } }`, 1)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: %q }\n%s\nnats: { embedded: { data_dir: %q, listen: %q, token: tok } }\n%s",
		httpListen, top, dataDir, natsListen, provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Review 41 (commit 34729d6: status says "no instance applies events"
// when only gateway serves answer and nothing pulls from WEBHOOKS). Its
// test holds a consumer serve that stopped with nothing outstanding.
// The same serve stopped while an event waits for its retry (its
// receiver refusing with a 503, the very moment an operator restarts or
// splits roles) leaves that delivery unacknowledged in the durable
// consumer, and nothing will ever pull it back: NumAckPending stays above
// 0, so idle() is false, and status reads PROBLEMS none while only
// gateways run and every new event piles up unapplied (until the oldest
// is half of max_age old, 15 days by default).
func TestReview41NoConsumerRoleWithADeliveryOutstandingIsAProblem(t *testing.T) {
	var hits atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:19814")
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	down.Listener.Close()
	down.Listener = ln
	down.Start()
	defer down.Close()

	dataDir := t.TempDir()
	both := review41Config(t, "127.0.0.1:19811", dataDir, "127.0.0.1:19812", down.URL, "consumer: { max_deliver: 8, backoff: [10m] }")
	gatewayOnly := review41Config(t, "127.0.0.1:19813", dataDir, "127.0.0.1:19812", down.URL, "roles: { consumer: false }")

	s := review7Start(t, both, true)
	if code := review6Post(t, s.base, `{"id":"o1","grant_id":"G-1","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post o1: %d", code)
	}
	for end := time.Now().Add(20 * time.Second); hits.Load() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the receiver got no request in 20 s\n%s", tail(s.stderr.String(), 2000))
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// Only a gateway runs on the store now; events keep coming.
	g := review7Start(t, gatewayOnly, true)
	defer g.stop(t)
	if code := review6Post(t, g.base, `{"id":"o2","grant_id":"G-2","at":"2026-11-30T10:00:00Z"}`); code != 200 {
		t.Fatalf("post o2: %d", code)
	}
	var doc struct {
		Problems []string `json:"problems"`
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := review9Run(t, "", "status", "--json", "--config", gatewayOnly)
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, r.stdout, r.stderr)
		}
		for _, p := range doc.Problems {
			if !strings.Contains(p, "not ready") {
				return
			}
		}
		if time.Now().After(end) {
			break
		}
	}
	text := review9Run(t, "", "status", "--config", gatewayOnly)
	t.Fatalf("only a gateway serve runs (roles.consumer false), nothing pulls from WEBHOOKS and its events wait unapplied, yet status lists no problem "+
		"(the consumer serve stopped while an event waited for its retry, so a delivery stays unacknowledged and idle() is false):\n%s", head(text.stdout, 30))
}
