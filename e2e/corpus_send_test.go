package e2e

// Sending a corpus case (through Go's client, or byte by byte on a TCP
// connection) and checking the answer and the stored message against it.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// corpusResult is what came back: an answer, or a connection closed
// without one.
type corpusResult struct {
	status  int
	header  http.Header
	body    []byte
	closed  error
	elapsed time.Duration
}

func (c *corpusCase) headersToSend(now time.Time) ([]corpusHeader, error) {
	sig, err := c.sign(now)
	if err != nil {
		return nil, err
	}
	hs := append(sig, c.Headers...)
	if !slices.ContainsFunc(hs, func(h corpusHeader) bool { return strings.EqualFold(h.Name, "Content-Type") }) {
		hs = append([]corpusHeader{{"Content-Type", corpusText("application/json")}}, hs...)
	}
	return hs, nil
}

// corpusClient never follows redirects: a 301 is an answer to check.
var corpusClient = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (c *corpusCase) sendHTTP(baseURL string) (corpusResult, error) {
	hs, err := c.headersToSend(time.Now())
	if err != nil {
		return corpusResult{}, err
	}
	req, err := http.NewRequest(c.Method, baseURL+c.Path, bytes.NewReader(c.Body))
	if err != nil {
		return corpusResult{}, err
	}
	for _, h := range hs {
		req.Header[h.Name] = append(req.Header[h.Name], string(h.Value)) // names as written, unnormalized
	}
	start := time.Now()
	resp, err := corpusClient.Do(req)
	if err != nil {
		return corpusResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return corpusResult{}, err
	}
	return corpusResult{status: resp.StatusCode, header: resp.Header, body: b, elapsed: time.Since(start)}, nil
}

// sendRaw writes the request on a plain TCP connection, so it can carry
// what Go's client refuses to send (CR/LF in values, lying lengths, odd
// framing), and reads the answer while still writing (a server may answer
// 413 before a 10 MB body is sent).
func (c *corpusCase) sendRaw(addr string, deadline time.Duration) (corpusResult, error) {
	r := c.Raw
	hs, err := c.headersToSend(time.Now())
	if err != nil {
		return corpusResult{}, err
	}
	target, proto := c.Path, "HTTP/1.1"
	if r.Target != "" {
		target = r.Target
	}
	if r.Proto != "" {
		proto = r.Proto
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s %s\r\n", c.Method, target, proto)
	if !r.NoHost {
		head.WriteString("Host: 127.0.0.1\r\n")
	}
	head.WriteString("Connection: close\r\n")
	for _, h := range hs {
		fmt.Fprintf(&head, "%s: %s\r\n", h.Name, h.Value)
	}
	for _, l := range r.Lines {
		head.Write(l)
		head.WriteString("\r\n")
	}
	payload := []byte(c.Body)
	switch {
	case r.Chunked > 0:
		head.WriteString("Transfer-Encoding: chunked\r\n")
		var w bytes.Buffer
		for rest := payload; len(rest) > 0; {
			n := min(r.Chunked, len(rest))
			fmt.Fprintf(&w, "%x\r\n%s\r\n", n, rest[:n])
			rest = rest[n:]
		}
		w.WriteString("0\r\n\r\n")
		payload = w.Bytes()
	case r.ContentLength == "" || r.ContentLength == "auto":
		fmt.Fprintf(&head, "Content-Length: %d\r\n", len(payload)+r.CLDelta)
	case r.ContentLength == "none":
	default:
		fmt.Fprintf(&head, "Content-Length: %s\r\n", r.ContentLength)
	}
	head.WriteString("\r\n")
	if r.Wire != nil {
		payload = *r.Wire
	}
	var trickle time.Duration
	if r.Trickle != "" {
		if trickle, err = time.ParseDuration(r.Trickle); err != nil {
			return corpusResult{}, err
		}
	}

	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return corpusResult{}, err
	}
	defer conn.Close()
	start := time.Now()
	_ = conn.SetDeadline(start.Add(deadline))
	done := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if trickle == 0 {
			// One write: a server that refuses the head and closes with
			// body bytes unread would reset the connection, and the reset
			// can destroy its answer before we read it.
			head.Write(payload)
			payload = nil
		}
		if _, err := conn.Write(head.Bytes()); err != nil {
			return // the server answered and hung up mid-body: read the answer
		}
		if trickle > 0 {
			for i := range payload {
				if _, err := conn.Write(payload[i : i+1]); err != nil {
					return
				}
				select {
				case <-done:
					return
				case <-time.After(trickle):
				}
			}
		}
		if r.HalfClose {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
	}()
	defer func() { close(done); _ = conn.Close(); <-wrote }()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: c.Method})
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(br, &http.Request{Method: c.Method}) // past 100 Continue
	}
	if err != nil {
		return corpusResult{closed: err, elapsed: time.Since(start)}, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return corpusResult{closed: err, elapsed: time.Since(start)}, nil
	}
	return corpusResult{status: resp.StatusCode, header: resp.Header, body: b, elapsed: time.Since(start)}, nil
}

// check compares an answer with the case's expectations and returns the
// problems found and, for an accepted event, its key.
func (c *corpusCase) check(res corpusResult) (problems []string, key string) {
	w := c.Want
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if w.Within != "" {
		if d, err := time.ParseDuration(w.Within); err != nil {
			fail("bad within %q", w.Within)
		} else if res.elapsed > d {
			fail("answered after %s, want within %s", res.elapsed.Round(time.Millisecond), d)
		}
	}
	if res.closed != nil {
		if !w.ClosedOK {
			fail("connection closed without an answer: %v", res.closed)
		}
		return problems, ""
	}
	if ok := res.status == w.Status || slices.Contains(w.StatusAny, res.status); !ok {
		want := slices.DeleteFunc(append([]int{w.Status}, w.StatusAny...), func(s int) bool { return s == 0 })
		fail("status %d, want one of %v; body %.300q", res.status, want, res.body)
		return problems, ""
	}
	for name, v := range w.Header {
		if got := res.header.Get(name); got != v {
			fail("answer header %s = %q, want %q", name, got, v)
		}
	}
	if w.BodyContains != "" && !bytes.Contains(res.body, []byte(w.BodyContains)) {
		fail("body %.300q does not contain %q", res.body, w.BodyContains)
	}
	if w.Plain {
		return problems, ""
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		fail("Content-Type %q, want application/json", ct)
	}
	var ans map[string]string
	if err := json.Unmarshal(res.body, &ans); err != nil {
		fail("answer %.300q is not a JSON object of strings: %v", res.body, err)
		return problems, ""
	}
	if res.status >= 400 {
		if ans["error"] == "" {
			fail("error answer %q has no \"error\" field", res.body)
		}
		if !strings.Contains(ans["error"], w.Error) {
			fail("error %q does not say %q", ans["error"], w.Error)
		}
		return problems, ""
	}
	if res.status != http.StatusOK {
		return problems, ""
	}
	want := w.Answer
	if want == "" {
		want = "accepted"
	}
	if ans["status"] != want {
		fail("answer status %q, want %q", ans["status"], want)
	}
	key = ans["key"]
	switch {
	case len(w.Key) > 0 && key != string(w.Key):
		fail("key %q, want %q", key, w.Key)
	case w.KeyHashOf != nil:
		sum := sha256.Sum256(*w.KeyHashOf)
		if wk := w.KeyPrefix + hex.EncodeToString(sum[:]); key != wk {
			fail("key %q, want %q (the hashed id)", key, wk)
		}
	case w.KeyPrefix != "" && !strings.HasPrefix(key, w.KeyPrefix):
		fail("key %q, want prefix %q", key, w.KeyPrefix)
	}
	return problems, key
}

// checkStored compares the stored message of key with the request.
func (c *corpusCase) checkStored(msg *js.RawStreamMsg, key string) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if !bytes.Equal(msg.Data, c.Body) {
		fail("stored body (%d bytes) differs from the body sent (%d bytes)", len(msg.Data), len(c.Body))
	}
	for name, v := range c.Want.Stored {
		v = strings.ReplaceAll(v, "$key", key)
		if got := corpusHeaderValues(msg.Header, name); len(got) != 1 || got[0] != v {
			fail("stored header %s = %q, want exactly [%q]", name, got, v)
		}
	}
	for _, name := range c.Want.NotStored {
		if got := corpusHeaderValues(msg.Header, name); len(got) > 0 {
			fail("stored header %s = %q, want it dropped", name, got)
		}
	}
	return problems
}

// corpusHeaderValues looks a header up ignoring case: nats.Header is a plain
// map, and the sender may have written any case.
func corpusHeaderValues(h nats.Header, name string) []string {
	var vs []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			vs = append(vs, v...)
		}
	}
	return vs
}

// corpusStoredMsgs returns every message in WEBHOOKS by Nats-Msg-Id.
func corpusStoredMsgs(t testing.TB, j js.JetStream) map[string][]*js.RawStreamMsg {
	t.Helper()
	ctx := t.Context()
	s, err := j.Stream(ctx, "WEBHOOKS")
	if err != nil {
		t.Fatalf("stream WEBHOOKS: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*js.RawStreamMsg{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("WEBHOOKS seq %d: %v", seq, err)
		}
		k := m.Header.Get("Nats-Msg-Id")
		out[k] = append(out[k], m)
	}
	return out
}
