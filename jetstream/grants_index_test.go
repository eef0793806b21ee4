package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// HasGrant finds a key among its subject's GRANTS messages, from since on,
// and nowhere else.
func TestHasGrant(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	t.Cleanup(func() { c.Close(); e.Shutdown() })
	fx := NewEffects(c)
	ctx := context.Background()
	const subj, other = "grants.p.G-1.award", "grants.p.G-2.award"
	publish := func(subject, key string) {
		t.Helper()
		h := http.Header{}
		h.Set("Hookgate-Key", key)
		if _, err := fx.PublishGrant(ctx, subject, key, h, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	// k0 .. k9 on subj, each followed by a message of another subject, so
	// the walk has to skip over them; k-other only on the other subject.
	for i := range 10 {
		publish(subj, fmt.Sprintf("k%d", i))
		publish(other, fmt.Sprintf("o%d", i))
	}
	publish(other, "k-other")
	last, err := GetMsg(ctx, c, StreamGrants, 21)
	if err != nil {
		t.Fatal(err)
	}
	after := last.Time.Add(time.Nanosecond) // later than every stamp

	for _, tc := range []struct {
		name, subject, key string
		since              time.Time
		want               bool
	}{
		{"first", subj, "k0", time.Time{}, true},
		{"last", subj, "k9", time.Time{}, true},
		{"with since", subj, "k5", after.Add(-time.Hour), true},
		{"stored before since", subj, "k5", after, false},
		{"never published", subj, "k10", time.Time{}, false},
		{"on another subject", subj, "k-other", time.Time{}, false},
		{"key of another subject", other, "k3", time.Time{}, false},
		{"subject without messages", "grants.p.G-3.award", "k1", time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fx.HasGrant(ctx, tc.subject, tc.key, tc.since)
			if err != nil || got != tc.want {
				t.Fatalf("HasGrant(%s, %s) = %v, %v; want %v", tc.subject, tc.key, got, err, tc.want)
			}
		})
	}

	// A republished key (a consumer's rerun after a crash) is still one
	// message: found, and the walk is not confused by the duplicate.
	publish(subj, "k3")
	if got, err := fx.HasGrant(ctx, subj, "k3", time.Time{}); err != nil || !got {
		t.Fatalf("after a duplicate publish: %v, %v", got, err)
	}

	// No JetStream answering: an error the consumer retries, not "no".
	e.Shutdown()
	if _, err := fx.HasGrant(ctx, subj, "k1", time.Time{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("server down: err = %v, want ErrUnavailable", err)
	}
}
