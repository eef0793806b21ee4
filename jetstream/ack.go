package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// pubAck is a stream's answer to a stored publish.
type pubAck struct {
	Stream    string
	Seq       uint64
	Duplicate bool
}

// storeTimeout bounds a KV write, as nats.go's default API timeout did.
const storeTimeout = 5 * time.Second

// No-responders retries, as nats.go's jetstream publish does them: a stream
// whose leader is moving answers nothing for a moment.
const (
	noRespondersWait     = 250 * time.Millisecond
	noRespondersAttempts = 2
)

// storeMsg publishes m into a stream and waits for the stream's answer. It
// is nats.go's jetstream PublishMsg (same request, same retries of "no
// responders", same errors: an API error is a wrapped *js.APIError, an
// unreadable answer js.ErrInvalidJSAck) without its per-call costs: every
// event makes one of these calls in the gateway and four in the consumer,
// and the reflection-based decoding of the answer plus the KV key
// validation were a tenth of the consumer's CPU per event
// (BenchmarkConsumerDrain profile).
//
// timeout bounds the wait (with its retries) besides ctx: an answer lost
// in a leader change must not hold a caller whose ctx has no deadline
// forever (nats.go bounds those by its 5 s API timeout).
func storeMsg(ctx context.Context, nc *nats.Conn, m *nats.Msg, timeout time.Duration) (pubAck, error) {
	resp, err := request(ctx, nc, m, timeout)
	if err != nil {
		return pubAck{}, err
	}
	return parsePubAck(resp.Data)
}

// request sends m and waits for the answer, bounded by timeout besides
// ctx, retrying "no responders" as nats.go's jetstream publish does (then
// js.ErrNoStreamResponse).
func request(ctx context.Context, nc *nats.Conn, m *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	var send func() (*nats.Msg, error)
	if ctx.Done() == nil {
		// A ctx that can never end (the gateway's and the consumer's are
		// WithoutCancel): nats.go's timed request, on a pooled timer, is
		// cheaper than a context per call.
		end := time.Now().Add(timeout)
		send = func() (*nats.Msg, error) {
			left := time.Until(end)
			if left <= 0 {
				return nil, nats.ErrTimeout
			}
			return nc.RequestMsg(m, left)
		}
	} else {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		send = func() (*nats.Msg, error) { return nc.RequestMsgWithContext(ctx, m) }
	}
	resp, err := send()
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < noRespondersAttempts; r++ {
		select {
		case <-ctx.Done():
		case <-time.After(noRespondersWait):
		}
		resp, err = send()
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, js.ErrNoStreamResponse
	}
	return resp, err
}

// parsePubAck reads a stream's answer as nats.go would (FuzzParsePubAck
// holds it to that). The answers a healthy stream sends, a flat object of
// "stream", "domain", "seq" and "duplicate" without escapes, are read by a
// scanner; anything else, errors included, goes through encoding/json.
func parsePubAck(data []byte) (pubAck, error) {
	if a, ok := scanPubAck(data); ok {
		return a, nil
	}
	var resp struct {
		Error *js.APIError `json:"error,omitempty"`
		*js.PubAck
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return pubAck{}, js.ErrInvalidJSAck
	}
	if resp.Error != nil {
		// Its text starts "nats: API error" already: wrapped in one more
		// "nats: " every full-store line read "nats: nats: ..." (a
		// resource audit, stop 39).
		return pubAck{}, resp.Error
	}
	if resp.PubAck == nil || resp.Stream == "" {
		return pubAck{}, js.ErrInvalidJSAck
	}
	return pubAck{Stream: resp.Stream, Seq: resp.Sequence, Duplicate: resp.Duplicate}, nil
}

// scanPubAck is parsePubAck's fast path; ok false means "ask encoding/json",
// never "invalid".
func scanPubAck(d []byte) (a pubAck, ok bool) {
	i := skipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return a, false
	}
	i++
	for {
		i = skipSpace(d, i)
		var key string
		if key, i, ok = scanPlainString(d, i); !ok {
			return a, false
		}
		if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
			return a, false
		}
		i = skipSpace(d, i+1)
		switch key {
		case "stream":
			if a.Stream, i, ok = scanPlainString(d, i); !ok {
				return a, false
			}
		case "domain":
			if _, i, ok = scanPlainString(d, i); !ok {
				return a, false
			}
		case "seq":
			if a.Seq, i, ok = scanUint(d, i); !ok {
				return a, false
			}
		case "duplicate":
			switch {
			case hasAt(d, i, "true"):
				a.Duplicate, i = true, i+4
			case hasAt(d, i, "false"):
				a.Duplicate, i = false, i+5
			default:
				return a, false
			}
		default:
			return a, false
		}
		if i = skipSpace(d, i); i >= len(d) {
			return a, false
		}
		switch d[i] {
		case ',':
			i++
			continue
		case '}':
			if skipSpace(d, i+1) != len(d) || a.Stream == "" {
				return a, false
			}
			return a, true
		}
		return a, false
	}
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// scanPlainString reads a JSON string of printable ASCII without escapes.
func scanPlainString(d []byte, i int) (string, int, bool) {
	if i >= len(d) || d[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return string(d[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c > 0x7e:
			return "", i, false
		}
	}
	return "", i, false
}

// scanUint reads a JSON integer that fits a uint64 (no sign, fraction,
// exponent or leading zero).
func scanUint(d []byte, i int) (uint64, int, bool) {
	j := i
	var n uint64
	for j < len(d) && d[j] >= '0' && d[j] <= '9' {
		c := uint64(d[j] - '0')
		if n > (math.MaxUint64-c)/10 {
			return 0, i, false
		}
		n = n*10 + c
		j++
	}
	if j == i || (d[i] == '0' && j > i+1) {
		return 0, i, false
	}
	if j < len(d) && (d[j] == '.' || d[j] == 'e' || d[j] == 'E') {
		return 0, i, false
	}
	return n, j, true
}

func hasAt(d []byte, i int, s string) bool {
	return len(d)-i >= len(s) && string(d[i:i+len(s)]) == s
}
