package consumer

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Audit 41 (operator at 3 a.m.): a receiver that takes the POST and closes
// the connection without an answer (a crashing worker, a proxy dropping
// the upstream, a receiver restarted mid-request) gives the dead letter's
// reason, the retry lines and `dlq list` "forward: POST http://host: EOF":
// net/http's io.EOF passed through. "EOF" names no cause an operator can
// act on; the timeout and the refused connection each get words of their
// own ("no response within 10s", "connection refused").
func TestAudit41OpsReceiverClosingWithoutAnswerIsSaidSo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Read the whole request, then hang up without a word.
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				_, _ = req.Body.Read(make([]byte, 1<<16))
			}
			c.Close()
		}
	}()
	f := newTestForward(t, ForwardOptions{URL: "http://" + l.Addr().String() + "/hook"})
	err = f.Apply(t.Context(), forwardTestEvent())
	var fe *ForwardError
	if !errors.As(err, &fe) || !fe.Retryable || errors.Is(err, ErrPermanent) {
		t.Fatalf("Apply = %v, want a retryable *ForwardError", err)
	}
	cause := strings.TrimPrefix(err.Error(), "forward: POST http://"+l.Addr().String()+": ")
	if cause == "EOF" || cause == "unexpected EOF" {
		t.Errorf("a receiver that closed the connection without answering: the reason reads %q (cause %q), naming nothing an operator can act on", err, cause)
	}
}
