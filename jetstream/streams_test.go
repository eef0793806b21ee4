package jetstream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

func TestProvisionIsIdempotentAndUpdates(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	ctx := context.Background()
	if err := Provision(ctx, c.JS, testStreams()); err != nil {
		t.Fatalf("second provision: %v", err)
	}
	sc := testStreams()
	sc.Webhooks.MaxAge = 48 * time.Hour
	sc.Horizon = 2 * time.Hour
	if err := Provision(ctx, c.JS, sc); err != nil {
		t.Fatalf("provision with new limits: %v", err)
	}
	s, err := c.JS.Stream(ctx, StreamWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxAge != 48*time.Hour || cfg.Duplicates != 2*time.Hour {
		t.Fatalf("WEBHOOKS max_age %s duplicates %s after update, want 48h / 2h", cfg.MaxAge, cfg.Duplicates)
	}
}

func TestProvisionExplainsWhatCannotChange(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	ctx := context.Background()
	// A GRANTS made by hand with memory storage: JetStream cannot move it
	// to file storage in place.
	if err := c.JS.DeleteStream(ctx, StreamGrants); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.CreateStream(ctx, js.StreamConfig{Name: StreamGrants, Subjects: []string{"grants.>"}, Storage: js.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	err := Provision(ctx, c.JS, testStreams())
	if !errors.Is(err, ErrConfigConflict) || !strings.Contains(err.Error(), "GRANTS") || !strings.Contains(err.Error(), "storage") {
		t.Fatalf("err = %v; want ErrConfigConflict naming GRANTS and storage", err)
	}
}

// TestProvisionKeepsKeyRecipes: WEBHOOKS keeps each provider's key recipe
// from one provisioning to the next; a change is told once, with both
// recipes; a provider this config lacks keeps its recipe (another
// instance's, or one renamed away), and a config without a gateway (nil
// recipes) changes none.
func TestProvisionKeepsKeyRecipes(t *testing.T) {
	e, c := startEmbedded(t, t.TempDir(), testStreams())
	defer e.Shutdown()
	defer c.Close()
	ctx := context.Background()
	var told []string
	provision := func(recipes map[string]string) map[string]string {
		t.Helper()
		sc := testStreams()
		sc.KeyRecipes = recipes
		sc.RecipeChanged = func(p, was, now string) { told = append(told, p+": "+was+" -> "+now) }
		if err := Provision(ctx, c.JS, sc); err != nil {
			t.Fatal(err)
		}
		s, err := c.JS.Stream(ctx, StreamWebhooks)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.Metadata
	}
	provision(map[string]string{"a": "r1", "b": "r1"})
	if len(told) != 0 {
		t.Fatalf("first recipes told as changes: %v", told)
	}
	md := provision(map[string]string{"a": "r2"})
	if strings.Join(told, ";") != "a: r1 -> r2" {
		t.Errorf("told %v; want a's change alone", told)
	}
	if md[keyRecipeMetadata+"a"] != "r2" || md[keyRecipeMetadata+"b"] != "r1" {
		t.Errorf("metadata %v; want a's new recipe and b's kept", md)
	}
	told = nil
	md = provision(nil)
	if len(told) != 0 || md[keyRecipeMetadata+"a"] != "r2" || md[keyRecipeMetadata+"b"] != "r1" {
		t.Errorf("without a gateway: told %v, metadata %v; want nothing told and both kept", told, md)
	}
}
