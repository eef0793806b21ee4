package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// Signer is what the load generator needs from a signature scheme:
// gateway.Scheme satisfies it, so bodies are signed by hookgate's own code.
type Signer interface {
	Sign(body []byte, secret config.Secret, id string, ts time.Time) (http.Header, error)
}

var _ Signer = gateway.Scheme(nil)

// LoadOptions configure one load run against one server.
type LoadOptions struct {
	Addr   string // host:port
	Path   string // "/webhooks/bench"
	Signer Signer // nil: unsigned
	Secret config.Secret

	Conns    int           // keep-alive connections, one worker each
	Warmup   time.Duration // sent but not measured
	Duration time.Duration // the measured window
	BodySize int           // bytes of JSON per new event
	// Redeliver is the share (0..1) of requests that re-send an earlier
	// request of the same connection byte for byte: a sender's retry.
	Redeliver float64
	// IDPrefix makes event ids unique across runs and rounds.
	IDPrefix string
	// Grants is how many distinct grant_id values each connection uses;
	// one connection owns its grants, so their occurred_at only grows.
	Grants int
	// Rate, when > 0, paces the load: Rate requests/s over all
	// connections, the k-th request due at k/Rate seconds after the load's
	// start (open loop), so a server that keeps up gets exactly this rate.
	// The connections share the schedule: each free one takes the next
	// slot, so a slot that passed while every connection waited for an
	// answer goes out with the next one free, and a server that cannot
	// keep up gets what Conns connections can give it (the rate measured
	// says so). 0: every connection sends its next request as soon as the
	// answer to the last one is in (closed loop).
	Rate float64
	// OnWindow, when set, is called when the measured window starts
	// (true) and ends (false), from a goroutine of its own.
	OnWindow func(start bool)
}

// LoadResult is what one load run measured.
type LoadResult struct {
	Measured uint64        // requests started and finished inside the window
	Window   time.Duration // the measured window
	RPS      float64       // Measured / Window
	Latency  *Histogram    // of the measured requests
	Sent     uint64        // every request, warm-up included
	// Slots is a paced load's schedule: how many requests fall due before
	// its end, warm-up included (0: not paced). Sent never exceeds it.
	Slots uint64
	// SentInWindow counts the requests sent inside the measured window
	// (answered or not): a paced load's offered rate is SentInWindow over
	// the window, which falls short of the schedule when every connection
	// waited for an answer as slots fell due.
	SentInWindow uint64
	Accepted     uint64 // 200 "accepted", warm-up included
	Duplicates   uint64 // 200 "duplicate", warm-up included
	Errors       uint64 // non-200 answers and transport errors, warm-up included
	Statuses     map[int]uint64
	FirstError   string
}

// Load runs o.Conns workers against o.Addr for o.Warmup+o.Duration. It
// speaks HTTP/1.1 itself over keep-alive connections: a minimal client
// spends less of the shared CPU than net/http's, leaving more of it to
// the server under test, and it is the same for every configuration.
func Load(ctx context.Context, o LoadOptions) (LoadResult, error) {
	if o.Conns < 1 {
		return LoadResult{}, errors.New("load: conns must be >= 1")
	}
	if o.Grants < 1 {
		o.Grants = 1000
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return LoadResult{}, fmt.Errorf("load: rate %g: want a finite rate, 0 or more", o.Rate)
	}
	start := time.Now()
	mStart := start.Add(o.Warmup)
	mEnd := mStart.Add(o.Duration)
	windowDone := make(chan struct{})
	if o.OnWindow == nil {
		close(windowDone)
	} else {
		go func() {
			defer close(windowDone)
			t := time.NewTimer(time.Until(mStart))
			defer t.Stop()
			select {
			case <-t.C:
				o.OnWindow(true)
			case <-ctx.Done():
				return
			}
			t.Reset(time.Until(mEnd))
			select {
			case <-t.C:
				o.OnWindow(false)
			case <-ctx.Done():
			}
		}()
	}
	results := make([]workerResult, o.Conns)
	pace := &pacer{start: start, end: mEnd, rate: o.Rate}
	var wg sync.WaitGroup
	for i := range o.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{o: &o, id: i, pace: pace, mStart: mStart, mEnd: mEnd, rng: rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(i)))}
			results[i] = w.run(ctx)
		}()
	}
	wg.Wait()
	// The end-of-window callback has run (or ctx ended) before Load
	// returns, so what it sampled is there for the caller.
	select {
	case <-windowDone:
	case <-ctx.Done():
	}
	res := LoadResult{Window: o.Duration, Latency: &Histogram{}, Statuses: map[int]uint64{}, Slots: pace.slots()}
	for i := range results {
		r := &results[i]
		res.Latency.Merge(&r.hist)
		res.Measured += r.measured
		res.Sent += r.sent
		res.SentInWindow += r.sentInWindow
		res.Accepted += r.accepted
		res.Duplicates += r.duplicates
		res.Errors += r.errors
		for k, v := range r.statuses {
			res.Statuses[k] += v
		}
		if res.FirstError == "" {
			res.FirstError = r.firstError
		}
	}
	if o.Duration > 0 {
		res.RPS = float64(res.Measured) / o.Duration.Seconds()
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

type workerResult struct {
	hist                                 Histogram
	measured, sent, accepted, duplicates uint64
	sentInWindow                         uint64
	errors                               uint64
	statuses                             map[int]uint64
	firstError                           string
}

type worker struct {
	o            *LoadOptions
	id           int
	seq          uint64
	pace         *pacer
	mStart, mEnd time.Time
	rng          *rand.Rand
	ring         [][]byte // recent requests, for redeliveries
	ringNext     int
	conn         net.Conn
	br           *bufio.Reader
	scratch      []byte
}

const ringSize = 256

func (w *worker) run(ctx context.Context) workerResult {
	r := workerResult{statuses: map[int]uint64{}}
	defer w.close()
	for ctx.Err() == nil {
		due, ok := w.pace.wait(ctx)
		if !ok {
			break
		}
		now := time.Now()
		if !now.Before(w.mEnd) {
			break
		}
		var req []byte
		if len(w.ring) > 0 && w.o.Redeliver > 0 && w.rng.Float64() < w.o.Redeliver {
			req = w.ring[w.rng.IntN(len(w.ring))]
		} else {
			var err error
			if req, err = w.newRequest(now); err != nil {
				r.fail(0, err)
				return r
			}
			if len(w.ring) < ringSize {
				w.ring = append(w.ring, req)
			} else {
				w.ring[w.ringNext] = req
				w.ringNext = (w.ringNext + 1) % ringSize
			}
		}
		if w.conn == nil {
			c, err := net.DialTimeout("tcp", w.o.Addr, 5*time.Second)
			if err != nil {
				r.fail(0, err)
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			w.conn, w.br = c, bufio.NewReaderSize(c, 16<<10)
		}
		_ = w.conn.SetDeadline(time.Now().Add(60 * time.Second))
		sentAt := time.Now()
		t0 := sentAt
		if !due.IsZero() && due.Before(t0) {
			// Paced: timed from when its slot fell due, so a request that
			// waited for a free connection counts that wait (review X: a
			// stalled answer delayed every slot behind it, and the wait
			// went unrecorded, coordinated omission).
			t0 = due
		}
		status, body, closing, err := w.roundTrip(req)
		t1 := time.Now()
		r.sent++
		if !sentAt.Before(w.mStart) && sentAt.Before(w.mEnd) {
			r.sentInWindow++
		}
		if err != nil {
			r.fail(0, err)
			w.close()
			continue
		}
		if closing {
			w.close()
		}
		r.statuses[status]++
		if status != 200 {
			// An error is not throughput: a gateway answering 401 fast
			// (a signing mistake) must not look like one beating the floor.
			r.fail(status, fmt.Errorf("status %d: %s", status, truncate(string(body), 200)))
			continue
		}
		if bytes.Contains(body, []byte(`"duplicate"`)) {
			r.duplicates++
		} else {
			r.accepted++
		}
		if !sentAt.Before(w.mStart) && !t1.After(w.mEnd) { // the window counts what was sent in it
			r.measured++
			r.hist.Record(t1.Sub(t0))
		}
	}
	return r
}

// pacer hands out the slots of a paced load (LoadOptions.Rate) to the
// connections: slot k is due at start + k/rate. Safe for concurrent use.
type pacer struct {
	start, end time.Time
	rate       float64 // 0: not paced
	next       atomic.Uint64
}

// wait takes the next slot and waits until it is due, and returns when it
// was due; without a rate it returns at once (a zero time). It reports
// false when the slot lies at or past the load's end, or ctx ended.
func (p *pacer) wait(ctx context.Context) (time.Time, bool) {
	if p.rate <= 0 {
		return time.Time{}, true
	}
	due, ok := p.due(p.next.Add(1) - 1)
	if !ok {
		return time.Time{}, false
	}
	if d := time.Until(due); d > 0 {
		sleepCtx(ctx, d)
	}
	return due, ctx.Err() == nil
}

// due is when slot k (0 first) falls due: k/rate after the start; false
// when that is at or past the end.
func (p *pacer) due(k uint64) (time.Time, bool) {
	// In float seconds first: a tiny rate's offset overflows a Duration.
	offset := float64(k) / p.rate
	if offset >= p.end.Sub(p.start).Seconds() {
		return time.Time{}, false
	}
	return p.start.Add(time.Duration(offset * float64(time.Second))), true
}

// slots is how many slots fall due before the end (0 without a rate).
func (p *pacer) slots() uint64 {
	if p.rate <= 0 {
		return 0
	}
	n := uint64(max(0, math.Ceil(p.end.Sub(p.start).Seconds()*p.rate)))
	// Settle the float product's rounding against due's own test.
	for n > 0 {
		if _, ok := p.due(n - 1); ok {
			break
		}
		n--
	}
	for {
		if _, ok := p.due(n); !ok {
			return n
		}
		n++
	}
}

func (r *workerResult) fail(status int, err error) {
	r.errors++
	if status == 0 {
		r.statuses[0]++
	}
	if r.firstError == "" {
		r.firstError = err.Error()
	}
}

func (w *worker) close() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn, w.br = nil, nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// newRequest builds the bytes of one request for a new event: a JSON body
// of o.BodySize bytes with a unique id, signed by o.Signer.
func (w *worker) newRequest(now time.Time) ([]byte, error) {
	w.seq++
	id := w.o.IDPrefix + "_" + strconv.Itoa(w.id) + "_" + strconv.FormatUint(w.seq, 10)
	grant := "G-" + strconv.Itoa(w.id) + "-" + strconv.FormatUint(w.seq%uint64(w.o.Grants), 10)
	body := Body(id, grant, now, w.o.BodySize)
	var hdr http.Header
	if w.o.Signer != nil {
		var err error
		if hdr, err = w.o.Signer.Sign(body, w.o.Secret, id, now); err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
	}
	b := make([]byte, 0, len(body)+512)
	b = append(b, "POST "...)
	b = append(b, w.o.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, w.o.Addr...)
	b = append(b, "\r\nUser-Agent: hookgate-bench\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nX-Event-Id: "...)
	b = append(b, id...)
	b = append(b, "\r\n"...)
	for k, vs := range hdr {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	return append(b, body...), nil
}

// Body returns a JSON event of about size bytes (never less than its
// fields need): id, type, grant_id, occurred_at, account and padding.
func Body(id, grant string, t time.Time, size int) []byte {
	b := make([]byte, 0, max(size, 256))
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"grant.updated","grant_id":"`...)
	b = append(b, grant...)
	b = append(b, `","occurred_at":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","account":"acct-1","data":{"note":"`...)
	const tail = `"}}`
	for len(b)+len(tail) < size {
		b = append(b, 'x')
	}
	return append(b, tail...)
}

// roundTrip writes req and reads one HTTP/1.1 response: its status, body
// (valid until the next call) and whether the server closes the connection.
func (w *worker) roundTrip(req []byte) (status int, body []byte, closing bool, err error) {
	if _, err := w.conn.Write(req); err != nil {
		return 0, nil, true, err
	}
	br := w.br
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, nil, true, fmt.Errorf("read status: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, true, fmt.Errorf("bad status line %q", truncate(string(line), 80))
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, true, fmt.Errorf("bad status line %q", truncate(string(line), 80))
	}
	length, chunked := -1, false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, nil, true, fmt.Errorf("read header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, nil, true, fmt.Errorf("bad content-length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = closing || bytes.EqualFold(value, []byte("close"))
		}
	}
	w.scratch = w.scratch[:0]
	switch {
	case chunked:
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return 0, nil, true, fmt.Errorf("read chunk: %w", err)
			}
			sz, _, _ := strings.Cut(strings.TrimSpace(string(line)), ";")
			n, err := strconv.ParseInt(sz, 16, 32)
			if err != nil {
				return 0, nil, true, fmt.Errorf("bad chunk size %q", sz)
			}
			if n == 0 {
				for { // trailers until the empty line
					l, err := br.ReadSlice('\n')
					if err != nil {
						return 0, nil, true, err
					}
					if len(bytes.TrimRight(l, "\r\n")) == 0 {
						break
					}
				}
				break
			}
			off := len(w.scratch)
			w.scratch = append(w.scratch, make([]byte, n)...)
			if _, err := io.ReadFull(br, w.scratch[off:]); err != nil {
				return 0, nil, true, err
			}
			if _, err := br.Discard(2); err != nil {
				return 0, nil, true, err
			}
		}
	case length >= 0:
		if cap(w.scratch) < length {
			w.scratch = make([]byte, length)
		}
		w.scratch = w.scratch[:length]
		if _, err := io.ReadFull(br, w.scratch); err != nil {
			return 0, nil, true, err
		}
	default:
		b, err := io.ReadAll(br)
		if err != nil {
			return 0, nil, true, err
		}
		w.scratch, closing = b, true
	}
	return status, w.scratch, closing, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
