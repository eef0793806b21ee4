package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

// instanceDoc is what a running serve says about itself when asked on
// jetstream.SubjectInstances, and what `hookgate status` lists (its --json
// "instances"): fields are added, never renamed or removed.
//
//	instance   host/pid
//	version    the build's version
//	roles      "gateway", "consumer"
//	listen     the HTTP listeners, "http://127.0.0.1:8080" (webhooks first,
//	           then admin_listen's)
//	started    when the process started (RFC 3339, UTC)
//	ready      what /readyz answers: true for 200
//	problem    /readyz's reason when not ready (a store that stopped
//	           writing, the key index still opening, a missing stream,
//	           draining before a stop)
//	applying   it runs the consumer now (on a cluster: holds the consumer
//	           lock); false on standbys and gateway-only instances
//	paused     a backup paused its consumer (hookgate backup)
type instanceDoc struct {
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	Roles    []string  `json:"roles"`
	Listen   []string  `json:"listen"`
	Started  time.Time `json:"started"`
	Ready    bool      `json:"ready"`
	Problem  string    `json:"problem,omitempty"`
	Applying bool      `json:"applying"`
	Paused   bool      `json:"paused,omitempty"`
	// HorizonSeconds: a gateway's dedup.horizon, so that status counts
	// the dedup store by the running gateway's horizon, not by whatever
	// the CLI's config says (absent from a serve before stop 40).
	HorizonSeconds int64 `json:"horizon_seconds,omitempty"`
	// ForwardPaused: providers whose forward receiver asked to be left
	// alone (429 or 503 with Retry-After), and until when: their events
	// wait untried, not delivered again, so nothing else tells status
	// (absent from a serve before stop 41).
	ForwardPaused map[string]time.Time `json:"forward_paused,omitempty"`
	// Retrying: events this serve handed back after a failed try, waiting
	// for their retry (absent from a serve before stop 42): until one is
	// delivered again, the durable consumer's "delivered again" count is 0
	// (audit 42: PROBLEMS none for a whole first backoff step).
	Retrying int `json:"retrying,omitempty"`
}

// instanceReporter builds serve's answer on jetstream.SubjectInstances.
// The answer carries the last readiness check's result (run keeps it
// fresh): answers are made one at a time, and a check waits for JetStream,
// which may not answer for seconds (a stream without a leader); answering
// after the check made status, which waits 2 s, miss a serve that is
// running but not ready, the one it most needs to list (review I).
type instanceReporter struct {
	doc      instanceDoc // the fixed part
	ready    func(context.Context) error
	applying *atomic.Bool // nil without the consumer role
	paused   *atomic.Bool // nil without the consumer role
	// pauses tells the forward receivers' pauses (nil without the
	// consumer role); safe for concurrent use.
	pauses func() map[string]time.Time
	// retrying counts the events waiting for a retry (nil without the
	// consumer role); safe for concurrent use.
	retrying func() int
	last     atomic.Pointer[readiness]
}

// readiness is one readiness check's result.
type readiness struct {
	err     error
	started time.Time
}

const (
	// readyEvery: how often run checks the readiness.
	readyEvery = time.Second
	// readyCheckWait bounds one check (/readyz's own bound).
	readyCheckWait = 2 * time.Second
	// readyStale: a result older than this means the check in progress
	// has not returned (it is bounded, so only a check that ignores its
	// deadline stays that long).
	readyStale = readyEvery + readyCheckWait + 2*time.Second
)

func newInstanceReporter(cfg *config.Config, listeners []listener, started time.Time, ready func(context.Context) error, applying *atomic.Bool) *instanceReporter {
	d := instanceDoc{
		Instance: instanceName(),
		Version:  buildVersion(),
		Started:  started.UTC().Truncate(time.Second),
		Roles:    []string{},
		Listen:   []string{},
	}
	if cfg.Roles.Gateway {
		d.Roles = append(d.Roles, "gateway")
		d.HorizonSeconds = seconds(cfg.Dedup.Horizon)
	}
	if cfg.Roles.Consumer {
		d.Roles = append(d.Roles, "consumer")
	}
	for _, l := range listeners {
		d.Listen = append(d.Listen, scheme(cfg)+"://"+l.ln.Addr().String())
	}
	return &instanceReporter{doc: d, ready: ready, applying: applying}
}

// run checks the readiness every readyEvery until ctx ends, the first
// time at once.
func (r *instanceReporter) run(ctx context.Context) {
	for {
		started := time.Now()
		c, cancel := context.WithTimeout(ctx, readyCheckWait)
		err := r.ready(c)
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.last.Store(&readiness{err: err, started: started})
		select {
		case <-ctx.Done():
			return
		case <-time.After(readyEvery):
		}
	}
}

// report is the answer now, at once: the fixed part with the last
// readiness check's result and whether the consumer applies. Safe for
// concurrent use.
func (r *instanceReporter) report() []byte {
	d := r.doc
	switch l := r.last.Load(); {
	case l == nil:
		d.Problem = "starting: readiness not checked yet"
	case time.Since(l.started) > readyStale:
		d.Problem = fmt.Sprintf("readiness check unanswered for %s", time.Since(l.started).Round(time.Second))
	case l.err != nil:
		d.Problem = l.err.Error()
	default:
		d.Ready = true
	}
	d.Applying = r.applying != nil && r.applying.Load()
	d.Paused = r.paused != nil && r.paused.Load()
	if r.pauses != nil {
		d.ForwardPaused = r.pauses()
	}
	if r.retrying != nil {
		d.Retrying = r.retrying()
	}
	b, err := json.Marshal(d)
	if err != nil { // a struct of strings, bools and a time: cannot fail
		return []byte(`{}`)
	}
	return b
}

// answerInstances makes serve answer `hookgate status`'s question from
// now (before its consumer starts: a backup finds every serve that may
// apply events here) until the returned function's ctx ends, keeping r's
// readiness fresh meanwhile. A serve that cannot subscribe (NATS
// permissions) still runs: it logs why, and status lists no instance for
// it.
func answerInstances(sys *system, r *instanceReporter, logger *slog.Logger) func(ctx context.Context) {
	stop, err := jetstream.AnswerInstances(sys.conn, r.report)
	if err != nil {
		logger.Warn("hookgate status will not list this instance", slog.String("error", err.Error()))
		return func(context.Context) {}
	}
	return func(ctx context.Context) {
		defer stop()
		r.run(ctx)
	}
}

// instancesView is what status shows of the running serves: the answers,
// or why there are none.
type instancesView struct {
	Docs []instanceDoc
	None string // why none is listed; "" when some answered
}

// askInstances asks the running serves about themselves, gathering the
// answers until 300 ms pass without one (2 s at most). Through the
// embedded server's listen there may be more than one too: serves with
// nats.url pointed at it (a consumer-only one, a gateway beside a
// consumer-only embedded hookgate; review I).
// gatewayHorizon is the shortest dedup.horizon of the answering gateways
// (the keys every one of them answers duplicate for); false when none
// said one.
func (v instancesView) gatewayHorizon() (time.Duration, bool) {
	var h time.Duration
	for _, d := range v.Docs {
		if d.HorizonSeconds > 0 && (h == 0 || time.Duration(d.HorizonSeconds)*time.Second < h) {
			h = time.Duration(d.HorizonSeconds) * time.Second
		}
	}
	return h, h > 0
}

func askInstances(ctx context.Context, sys *system, via string) instancesView {
	if via == viaDataDir {
		return instancesView{None: "no serve runs (status opened data_dir itself)"}
	}
	o := jetstream.AskOptions{Wait: 2 * time.Second, Quiet: 300 * time.Millisecond}
	answers, err := jetstream.AskInstances(ctx, sys.conn, o)
	if err != nil {
		why := err.Error()
		if errors.Is(err, jetstream.ErrNoAnswer) {
			why += " (no serve running, or NATS permissions deny " + jetstream.SubjectInstances + ")"
		}
		return instancesView{None: why}
	}
	var v instancesView
	for _, a := range answers {
		var d instanceDoc
		if err := json.Unmarshal(a, &d); err != nil || d.Instance == "" {
			// Not a serve's answer (something else subscribes to the
			// subject): shown, not trusted.
			d = instanceDoc{Instance: "?", Problem: "an answer that is not a hookgate serve's: " + printable(truncate(string(a), 80))}
		}
		v.Docs = append(v.Docs, d)
	}
	slices.SortFunc(v.Docs, func(a, b instanceDoc) int { return strings.Compare(a.Instance, b.Instance) })
	return v
}

// truncate is s cut to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// writeInstances prints the instances table, then each one's problem.
func writeInstances(w io.Writer, v instancesView) {
	if len(v.Docs) == 0 {
		fmt.Fprintf(w, "INSTANCES  none: %s\n\n", v.None)
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "INSTANCE\tROLES\tREADY\tAPPLYING\tSTARTED\tLISTEN\tVERSION")
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	for _, d := range v.Docs {
		listen := "-"
		if len(d.Listen) > 0 {
			listen = strings.Join(d.Listen, ",")
		}
		roles := "-"
		if len(d.Roles) > 0 {
			roles = strings.Join(d.Roles, ",")
		}
		applying := yes(d.Applying)
		if d.Paused {
			applying = "paused (backup)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(d.Instance), printable(roles), yes(d.Ready), applying,
			stamp(d.Started), printable(listen), printable(d.Version))
	}
	_ = tw.Flush()
	for _, d := range v.Docs {
		if d.Problem != "" {
			fmt.Fprintf(w, "%s not ready: %s\n", printable(d.Instance), printable(d.Problem))
		}
	}
	fmt.Fprintln(w)
}
