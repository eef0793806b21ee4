package jetstream

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// The sequenced publish on a real server: a publish after the subject's
// actual last message succeeds, one after any other sequence is refused
// with ErrGrantMoved and stores nothing (a repeat of an already stored
// message included, however old its duplicate window says it is), and the
// reads find what a refused holder must see.
func TestSequencedGrants(t *testing.T) {
	cfg := testStreams()
	cfg.GrantsWindow = 100 * time.Millisecond // the server's least: no help from Nats-Msg-Id
	e, c := startEmbedded(t, t.TempDir(), cfg)
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	fx := NewEffects(c)
	ctx := context.Background()
	const subj, other = "grants.p.G-1.award", "grants.p.G-2.award"
	hdr := func(key string) http.Header {
		h := http.Header{}
		h.Set("Hookgate-Key", key)
		h.Set("Hookgate-Subject", "G-1")
		h.Set("X-Not-Copied", "x")
		return h
	}

	if top, err := fx.LastGrant(ctx, subj); err != nil || top != 0 {
		t.Fatalf("LastGrant of an empty subject = %d, %v; want 0", top, err)
	}
	s1, err := fx.PublishGrantAfter(ctx, subj, "k1", 0, hdr("k1"), []byte(`{"n":1}`))
	if err != nil {
		t.Fatalf("first publish on an empty subject: %v", err)
	}
	// Another subject's messages move neither the expectation nor the reads.
	if _, err := fx.PublishGrantAfter(ctx, other, "o1", 0, hdr("o1"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	s2, err := fx.PublishGrantAfter(ctx, subj, "k2", s1, hdr("k2"), []byte(`{"n":2}`))
	if err != nil {
		t.Fatalf("publish after the last message: %v", err)
	}

	// A stale expectation is refused, whatever the key: a repeat of k1
	// (its window long gone) and a new key alike.
	waitUntil(t, "k1's duplicate window to pass", func() bool {
		// A probe on a third subject, with k1's id: stored again once the
		// window forgot k1.
		seq, err := fx.PublishGrant(ctx, "grants.p.probe", "k1", hdr("k1"), nil)
		return err == nil && seq != s1
	})
	for _, key := range []string{"k1", "k3"} {
		_, err := fx.PublishGrantAfter(ctx, subj, key, s1, hdr(key), []byte(`{}`))
		if !errors.Is(err, consumer.ErrGrantMoved) {
			t.Fatalf("publish of %s after %d (last is %d): %v, want ErrGrantMoved", key, s1, s2, err)
		}
	}
	if top, err := fx.LastGrant(ctx, subj); err != nil || top != s2 {
		t.Fatalf("LastGrant = %d, %v; want %d (nothing stored by the refusals)", top, err, s2)
	}

	var got []consumer.GrantMsg
	scan := func(after uint64, since time.Time, upTo uint64) []string {
		t.Helper()
		got = got[:0]
		if err := fx.ScanGrants(ctx, subj, after, since, upTo, func(m consumer.GrantMsg) { got = append(got, m) }); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, m := range got {
			keys = append(keys, m.Key)
		}
		return keys
	}
	if keys := scan(0, time.Time{}, s2); !slices.Equal(keys, []string{"k1", "k2"}) {
		t.Fatalf("scan from the start = %v, want [k1 k2]", keys)
	}
	if got[1].Seq != s2 || got[1].Header.Get("Hookgate-Subject") != "G-1" || got[1].Header.Get("X-Not-Copied") != "" {
		t.Fatalf("scanned message %+v: want seq %d, the Hookgate-* headers only", got[1], s2)
	}
	if keys := scan(s1, time.Time{}, s2); !slices.Equal(keys, []string{"k2"}) {
		t.Fatalf("scan after %d = %v, want [k2]", s1, keys)
	}
	if keys := scan(0, time.Time{}, s1); !slices.Equal(keys, []string{"k1"}) {
		t.Fatalf("scan up to %d = %v, want [k1]", s1, keys)
	}
	if keys := scan(0, time.Now().Add(time.Hour), s2); len(keys) != 0 {
		t.Fatalf("scan from an hour ahead = %v, want none", keys)
	}
	if keys := scan(0, time.Now().Add(-time.Hour), s2); !slices.Equal(keys, []string{"k1", "k2"}) {
		t.Fatalf("scan from an hour back = %v, want [k1 k2]", keys)
	}
}
