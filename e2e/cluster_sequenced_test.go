package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	hgjs "github.com/hookgate/hookgate/jetstream"
)

// On an R3 GRANTS, sequenced publishes that race on one GRANTS subject
// (holders after a lost lease) store exactly one message, and every other
// is refused as moved, which the consumer answers by reading: the server
// refuses a publish while another write of the subject is in flight with
// 10164, which the publisher waits out rather than report as a failure
// (found in review: counted as a failed attempt). A lone holder publishing
// after its own acks is never refused.
func TestClusterSequencedRacingPublishesOneStored(t *testing.T) {
	c := startCluster(t)
	conn, err := hgjs.Connect(hgjs.ConnectOptions{Name: t.Name(), URL: c.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lim := hgjs.Limits{MaxAge: time.Hour, MaxBytes: 64 << 20}
	sc := hgjs.StreamsConfig{Replicas: 3, Horizon: time.Hour, DedupWindow: 2 * time.Minute, GrantsWindow: 2 * time.Minute,
		MaxMsgSize: 1 << 20, Webhooks: lim, Grants: lim, DLQ: lim, Audit: lim}
	if err := hgjs.Provision(ctx, conn.JS, sc); err != nil {
		t.Fatal(err)
	}
	fx := hgjs.NewEffects(conn)
	hdr := func(key string) http.Header {
		h := http.Header{}
		h.Set("Hookgate-Key", key)
		return h
	}
	const rounds, holders = 30, 4
	for round := range rounds {
		subj := fmt.Sprintf("grants.p.acct.S%d", round)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			stored int
			errs   []error
		)
		for h := range holders {
			wg.Go(func() {
				key := fmt.Sprintf("r%d-h%d", round, h)
				_, err := fx.PublishGrantAfter(ctx, subj, key, 0, hdr(key), []byte(`{}`))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					stored++
				case !errors.Is(err, consumer.ErrGrantMoved):
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if stored != 1 || len(errs) > 0 {
			t.Fatalf("round %d: %d stored of %d racing publishes after 0, want 1; refusals not ErrGrantMoved: %v", round, stored, holders, errs)
		}
		if top, err := fx.LastGrant(ctx, subj); err != nil || top == 0 {
			t.Fatalf("round %d: LastGrant = %d, %v", round, top, err)
		}
	}

	last := uint64(0)
	const subj = "grants.p.acct.hot"
	for i := range 500 {
		key := fmt.Sprintf("hot-%d", i)
		seq, err := fx.PublishGrantAfter(ctx, subj, key, last, hdr(key), []byte(`{}`))
		if err != nil {
			t.Fatalf("publish %d after its own previous (%d): %v", i, last, err)
		}
		last = seq
	}
}
