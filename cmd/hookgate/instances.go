package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

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
type instanceDoc struct {
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	Roles    []string  `json:"roles"`
	Listen   []string  `json:"listen"`
	Started  time.Time `json:"started"`
	Ready    bool      `json:"ready"`
	Problem  string    `json:"problem,omitempty"`
	Applying bool      `json:"applying"`
}

// instanceReporter builds serve's answer on jetstream.SubjectInstances.
type instanceReporter struct {
	doc      instanceDoc // the fixed part
	ready    func(context.Context) error
	applying *atomic.Bool // nil without the consumer role
}

func newInstanceReporter(cfg *config.Config, listeners []listener, started time.Time, ready func(context.Context) error, applying *atomic.Bool) *instanceReporter {
	host, _ := os.Hostname()
	d := instanceDoc{
		Instance: fmt.Sprintf("%s/%d", host, os.Getpid()),
		Version:  buildVersion(),
		Started:  started.UTC().Truncate(time.Second),
		Roles:    []string{},
		Listen:   []string{},
	}
	if cfg.Roles.Gateway {
		d.Roles = append(d.Roles, "gateway")
	}
	if cfg.Roles.Consumer {
		d.Roles = append(d.Roles, "consumer")
	}
	for _, l := range listeners {
		d.Listen = append(d.Listen, scheme(cfg)+"://"+l.ln.Addr().String())
	}
	return &instanceReporter{doc: d, ready: ready, applying: applying}
}

// report is the answer now: the fixed part with readiness and whether
// the consumer applies. Safe for concurrent use.
func (r *instanceReporter) report() []byte {
	d := r.doc
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.ready(ctx); err != nil {
		d.Problem = err.Error()
	} else {
		d.Ready = true
	}
	d.Applying = r.applying != nil && r.applying.Load()
	b, err := json.Marshal(d)
	if err != nil { // a struct of strings, bools and a time: cannot fail
		return []byte(`{}`)
	}
	return b
}

// answerInstances makes serve answer `hookgate status`'s question. A
// serve that cannot subscribe still runs (it logs why: status then lists
// no instance).
func answerInstances(sys *system, r *instanceReporter, logger *slog.Logger) (stop func()) {
	stop, err := jetstream.AnswerInstances(sys.conn, r.report)
	if err != nil {
		logger.Warn("hookgate status will not list this instance", slog.String("error", err.Error()))
		return func() {}
	}
	return stop
}

// instancesView is what status shows of the running serves: the answers,
// or why there are none.
type instancesView struct {
	Docs []instanceDoc
	None string // why none is listed; "" when some answered
}

// askInstances asks the running serves about themselves. The embedded
// server has one at most (data_dir's lock); on a cluster the answers are
// gathered until 300 ms pass without one (2 s at most).
func askInstances(ctx context.Context, sys *system, via string) instancesView {
	if via == viaDataDir {
		return instancesView{None: "no serve runs (status opened data_dir itself)"}
	}
	o := jetstream.AskOptions{Wait: 2 * time.Second, Quiet: 300 * time.Millisecond}
	if via == viaListen {
		o.Max = 1
	}
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// writeInstances prints the instances table, then each one's problem.
func writeInstances(w io.Writer, v instancesView) {
	if len(v.Docs) == 0 {
		fmt.Fprintf(w, "INSTANCES  none: %s\n\n", v.None)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(d.Instance), printable(roles), yes(d.Ready), yes(d.Applying),
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
