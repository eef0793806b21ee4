package jetstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Stream and subject names: the external contract.
const (
	StreamWebhooks = "WEBHOOKS"
	StreamGrants   = "GRANTS"
	StreamDLQ      = "DLQ"
	StreamAudit    = "AUDIT"
	BucketMarks    = "WATERMARKS"
)

// Limits bounds one stream.
type Limits struct {
	MaxAge   time.Duration
	MaxBytes int64
}

// StreamsConfig is what Provision needs from the config.
type StreamsConfig struct {
	Replicas    int
	Horizon     time.Duration // WEBHOOKS duplicate window (see KeyIndex)
	DedupWindow time.Duration // DLQ duplicate window
	// KeyIndex: the gateway keeps WEBHOOKS's keys over the horizon in a
	// KeyIndex (the embedded server, one writer), so WEBHOOKS's own
	// duplicate window is DedupWindow instead of Horizon; WEBHOOKS is
	// marked so (KeyIndexMetadata).
	// Without it, a WEBHOOKS marked as kept by an embedded hookgate's key
	// index keeps its window and mark: this process is attached to that
	// server by nats.url (a consumer, a CLI), or is that hookgate started
	// consumer-only. Widening the window would not bring back the older
	// ids (the server reads them only at start), and the mark keeps a
	// gateway elsewhere from starting on it (KeyIndexClaimed).
	KeyIndex bool
	// GrantsWindow is GRANTS's duplicate window: dedup.window when every
	// rule publishes the sequenced way (see cmd/hookgate's grantsWindow);
	// 0 means Horizon.
	GrantsWindow time.Duration
	// MaxMsgSize bounds a WEBHOOKS message (the gateway's body limit and
	// its headers) and an AUDIT one. GRANTS and DLQ take any message the
	// server does: they carry events already accepted, which a lowered
	// body limit must not keep from being applied or dead-lettered
	// (review AH: a subject stalled for good behind such an event).
	MaxMsgSize int32
	// KeyRecipes are the gateway's key recipes by provider
	// (config.Provider.KeyRecipe), kept in WEBHOOKS's metadata from one
	// start to the next; nil (no gateway here) leaves the kept ones as
	// they are. RecipeChanged (may be nil) hears of each provider whose
	// recipe differs from the one kept, before the new one replaces it.
	KeyRecipes    map[string]string
	RecipeChanged func(provider, was, now string)
	Webhooks      Limits
	Grants        Limits
	DLQ           Limits
	Audit         Limits
}

// StreamConfigs returns the desired configs of the streams, in provisioning
// order.
func StreamConfigs(c StreamsConfig) []js.StreamConfig {
	r := c.Replicas
	if r < 1 {
		r = 1
	}
	return []js.StreamConfig{
		{
			Name:        StreamWebhooks,
			Description: "hookgate: every accepted webhook, raw body, Nats-Msg-Id = idempotency key",
			Subjects:    []string{"webhooks.>"},
			Retention:   js.LimitsPolicy,
			Storage:     js.FileStorage,
			// DiscardNew: a full stream refuses the write (503 to the
			// sender, who retries) instead of silently dropping old events.
			Discard:    js.DiscardNew,
			MaxAge:     c.Webhooks.MaxAge,
			MaxBytes:   c.Webhooks.MaxBytes,
			MaxMsgSize: c.MaxMsgSize,
			// The duplicate window is the whole dedup horizon: the
			// event and its key are one write (see Publisher). With a
			// KeyIndex it is dedup.window: the index holds the keys
			// beyond it, read from this stream (see KeyIndex).
			Duplicates: webhooksWindow(c),
			Metadata:   webhooksMetadata(c),
			// Deletes would make the server forget a key at restart.
			DenyDelete: true,
			DenyPurge:  true,
			Replicas:   r,
		},
		{
			Name:        StreamGrants,
			Description: "hookgate: one message per applied event, for downstream services",
			Subjects:    []string{"grants.>"},
			Retention:   js.LimitsPolicy,
			Storage:     js.FileStorage,
			Discard:     js.DiscardNew,
			MaxAge:      c.Grants.MaxAge,
			MaxBytes:    c.Grants.MaxBytes,
			MaxMsgSize:  -1, // see StreamsConfig.MaxMsgSize
			// A repeat publish after a consumer crash, however long it
			// lasted, must not be a second message: the sequenced publish
			// refuses it (consumer's sequenced.go), else Nats-Msg-Id
			// over a horizon-long window does.
			Duplicates: grantsWindow(c),
			Replicas:   r,
		},
		{
			Name:        StreamDLQ,
			Description: "hookgate: dead letters with their reason",
			Subjects:    []string{"dlq.>"},
			Retention:   js.LimitsPolicy,
			Storage:     js.FileStorage,
			Discard:     js.DiscardNew,
			MaxAge:      c.DLQ.MaxAge,
			MaxBytes:    c.DLQ.MaxBytes,
			MaxMsgSize:  -1, // see StreamsConfig.MaxMsgSize
			Duplicates:  c.DedupWindow,
			Replicas:    r,
		},
		{
			Name:        StreamAudit,
			Description: "hookgate: append-only record of every decision",
			Subjects:    []string{"audit.>"},
			Retention:   js.LimitsPolicy,
			Storage:     js.FileStorage,
			// The audit trail must never block ingestion: when full it
			// ages out its oldest records.
			Discard:    js.DiscardOld,
			MaxAge:     c.Audit.MaxAge,
			MaxBytes:   c.Audit.MaxBytes,
			DenyDelete: true,
			DenyPurge:  true,
			// Set explicitly: left at 0 the server fills in its defaults,
			// and every start would see a difference and update AUDIT.
			Duplicates: c.DedupWindow,
			MaxMsgSize: c.MaxMsgSize,
			Replicas:   r,
		},
	}
}

// Provision creates the streams or brings existing ones to the config. It
// is idempotent. A difference JetStream cannot apply in place (storage,
// retention, ...) is returned as ErrConfigConflict with an explanation.
func Provision(ctx context.Context, j js.JetStream, c StreamsConfig) error {
	return noJetStreamHint(retryProvision(ctx, func(ctx context.Context) error { return provision(ctx, j, c) }))
}

// noJetStreamHint says what a JetStream API without responders, through
// all of Provision's retries, most likely means: the NATS server at
// nats.url has no JetStream (audit 42: serve ended with "no responders
// available for request" alone).
func noJetStreamHint(err error) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, js.ErrJetStreamNotEnabled) {
		return fmt.Errorf("%w (nothing answered JetStream's API for 30 s: JetStream is most likely not enabled on the NATS server at nats.url, or not for this account: enable it there, a jetstream block in its config or nats-server -js)", err)
	}
	return err
}

func provision(ctx context.Context, j js.JetStream, c StreamsConfig) error {
	// Every stream looked up before any is made: a missing one may be
	// what a restore stopped part way has not made yet (its mark is on
	// DLQ, restored first and unmarked last, until it finished). Only
	// the streams serve looks up anyway, so a user allowed those needs no
	// other permission.
	wants := StreamConfigs(c)
	found := make([]js.Stream, len(wants))
	var marked []string
	for i, want := range wants {
		s, err := j.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, js.ErrStreamNotFound):
			continue
		case err != nil:
			return classify("look up stream "+want.Name, err)
		}
		found[i] = s
		if _, ok := s.CachedInfo().Config.Metadata[RestoreMetadata]; ok {
			marked = append(marked, want.Name)
		}
	}
	if len(marked) > 0 {
		return unfinishedRestoreError(marked)
	}
	var problems []string
	for i, want := range wants {
		s := found[i]
		if s == nil {
			if _, err := j.CreateStream(ctx, want); err != nil {
				return classify("create stream "+want.Name, err)
			}
			continue
		}
		have := s.CachedInfo().Config
		if mark := have.Metadata[KeyIndexMetadata]; want.Name == StreamWebhooks {
			switch {
			case !c.KeyIndex && mark != "":
				want.Duplicates = have.Duplicates
				want.Metadata = map[string]string{KeyIndexMetadata: mark}
			case c.KeyIndex && mark != keyIndexKept && have.Duplicates >= c.Horizon:
				// Not yet kept by a key index (an upgrade): the server
				// started with this window and holds every id of the
				// horizon. Keep it until the index has read them
				// (NarrowWebhooks); marked pending meanwhile, so that no
				// gateway elsewhere starts on it (KeyIndexClaimed).
				want.Duplicates = have.Duplicates
				want.Metadata = map[string]string{KeyIndexMetadata: keyIndexPending}
			}
			want.Metadata = keptRecipes(have.Metadata, want.Metadata, c)
		}
		if fixed := immutableDiff(have, want); fixed != "" {
			problems = append(problems, fmt.Sprintf("stream %s: %s cannot be changed in place; keep the old value or migrate the stream (see README, Running in production)", want.Name, fixed))
			continue
		}
		if sameUpdatable(have, want) {
			continue
		}
		if _, err := j.UpdateStream(ctx, want); err != nil {
			if cerr := classify("update stream "+want.Name, err); transient(cerr) {
				return cerr
			}
			problems = append(problems, fmt.Sprintf("stream %s: update refused: %v", want.Name, err))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrConfigConflict, strings.Join(problems, "; "))
	}
	return nil
}

func immutableDiff(have, want js.StreamConfig) string {
	var d []string
	if have.Storage != want.Storage {
		d = append(d, "storage")
	}
	if have.Retention != want.Retention {
		d = append(d, "retention")
	}
	if have.DenyDelete != want.DenyDelete || have.DenyPurge != want.DenyPurge {
		d = append(d, "deny_delete/deny_purge")
	}
	return strings.Join(d, ", ")
}

func sameUpdatable(have, want js.StreamConfig) bool {
	return ownMetadataEqual(have.Metadata, want.Metadata) &&
		have.MaxAge == want.MaxAge && have.MaxBytes == want.MaxBytes &&
		have.MaxMsgSize == want.MaxMsgSize && have.Duplicates == want.Duplicates &&
		have.Replicas == want.Replicas && have.Discard == want.Discard &&
		strings.Join(have.Subjects, ",") == strings.Join(want.Subjects, ",")
}

// keyRecipeMetadata prefixes a provider's name in WEBHOOKS's metadata: its
// key recipe at the last start of a gateway.
const keyRecipeMetadata = "hookgate_key_recipe_"

// keptRecipes returns want's metadata with the key recipes: c's, and the
// kept ones (have) of providers c has none for. It tells c.RecipeChanged
// of each provider whose recipe differs from the kept one.
func keptRecipes(have, want map[string]string, c StreamsConfig) map[string]string {
	out := maps.Clone(want)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range have {
		if strings.HasPrefix(k, keyRecipeMetadata) {
			out[k] = v
		}
	}
	for _, p := range slices.Sorted(maps.Keys(c.KeyRecipes)) {
		now := c.KeyRecipes[p]
		if was, ok := have[keyRecipeMetadata+p]; ok && was != now && c.RecipeChanged != nil {
			c.RecipeChanged(p, was, now)
		}
		out[keyRecipeMetadata+p] = now
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ownMetadataEqual compares hookgate's entries of two streams' metadata
// (the server adds its own, _nats.*).
func ownMetadataEqual(a, b map[string]string) bool {
	own := func(m map[string]string) map[string]string {
		o := map[string]string{}
		for k, v := range m {
			if strings.HasPrefix(k, "hookgate_") {
				o[k] = v
			}
		}
		return o
	}
	return maps.Equal(own(a), own(b))
}

// KeyIndexMetadata marks a WEBHOOKS whose keys an embedded hookgate's key
// index holds over the horizon (its own duplicate window is shorter).
const KeyIndexMetadata = "hookgate_key_index"

func webhooksMetadata(c StreamsConfig) map[string]string {
	m := map[string]string{}
	if c.KeyIndex {
		m[KeyIndexMetadata] = keyIndexKept
	}
	for p, r := range c.KeyRecipes {
		m[keyRecipeMetadata+p] = r
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// The values of KeyIndexMetadata: kept (the window narrowed), or pending
// (an upgrade: the index is being built, the window still spans the
// horizon).
const (
	keyIndexKept    = "true"
	keyIndexPending = "pending"
)

// KeyIndexKept reports whether WEBHOOKS is kept by an embedded hookgate's
// key index, its window narrowed, and WEBHOOKS's last sequence (for
// KeyIndexOptions.StreamLastSeq).
func KeyIndexKept(ctx context.Context, j js.JetStream) (kept bool, lastSeq uint64, err error) {
	s, err := j.Stream(ctx, StreamWebhooks)
	if err != nil {
		return false, 0, classify("stream "+StreamWebhooks, err)
	}
	info := s.CachedInfo()
	return info.Config.Metadata[KeyIndexMetadata] == keyIndexKept, info.State.LastSeq, nil
}

// KeyIndexClaimed reports whether an embedded hookgate's key index keeps
// WEBHOOKS or is being built for it: a gateway elsewhere would not know
// its keys.
func KeyIndexClaimed(ctx context.Context, j js.JetStream) (bool, error) {
	mark, err := keyIndexMark(ctx, j)
	return mark != "", err
}

func keyIndexMark(ctx context.Context, j js.JetStream) (string, error) {
	s, err := j.Stream(ctx, StreamWebhooks)
	if err != nil {
		return "", classify("stream "+StreamWebhooks, err)
	}
	return s.CachedInfo().Config.Metadata[KeyIndexMetadata], nil
}

// NarrowWebhooks gives WEBHOOKS the window and mark of a key-indexed
// stream (c.KeyIndex), once the key index knows every key of the horizon:
// from then on the server forgets ids after dedup.window.
func NarrowWebhooks(ctx context.Context, j js.JetStream, c StreamsConfig) error {
	s, err := j.Stream(ctx, StreamWebhooks)
	if err != nil {
		return classify("stream "+StreamWebhooks, err)
	}
	cfg := s.CachedInfo().Config
	cfg.Duplicates = webhooksWindow(c)
	// The provisioning at start already told of recipe changes.
	cfg.Metadata = keptRecipes(cfg.Metadata, webhooksMetadata(c), StreamsConfig{KeyRecipes: c.KeyRecipes})
	if _, err := j.UpdateStream(ctx, cfg); err != nil {
		return classify("update stream "+StreamWebhooks, err)
	}
	return nil
}

func webhooksWindow(c StreamsConfig) time.Duration {
	if c.KeyIndex && c.DedupWindow > 0 && c.DedupWindow < c.Horizon {
		return c.DedupWindow
	}
	return c.Horizon
}

func grantsWindow(c StreamsConfig) time.Duration {
	if c.GrantsWindow <= 0 || c.GrantsWindow > c.Horizon {
		return c.Horizon
	}
	return c.GrantsWindow
}
