package consumer_test

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

// TestReviewBHISO8601BasicFormatWithoutZone: the contract's Sequencing
// section accepts "ISO 8601 without a zone (read as UTC whatever the host's
// zone)". ISO 8601's basic format (no separators) is ISO 8601 too, yet the
// built binary dead-lettered such events at once ("unexpected 'T' at byte
// 8"), never retried and never re-feedable: review BH.
func TestReviewBHISO8601BasicFormatWithoutZone(t *testing.T) {
	want := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, raw := range []string{
		"20261130T100000", // basic format, no zone
		"20261130T1000",   // basic format, seconds left out (the extended form's 10:00 is accepted)
	} {
		got, err := consumer.ParseOccurredAt(raw)
		if err != nil {
			t.Errorf("ParseOccurredAt(%q): %v; want %s", raw, err, want.Format(time.RFC3339))
			continue
		}
		if !got.Equal(want) {
			t.Errorf("ParseOccurredAt(%q) = %s; want %s", raw, got.Format(time.RFC3339Nano), want.Format(time.RFC3339))
		}
	}
}

// The basic format with what may follow its seconds: a fraction, a zone.
// And what stays refused: a time with neither minutes nor seconds, and
// digits that fit neither form.
func TestReviewBHISO8601BasicFormatWithFractionAndZone(t *testing.T) {
	for raw, want := range map[string]time.Time{
		"20261130T100000Z":     time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
		"20261130t110000+0100": time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
		"20261130T100000.5":    time.Date(2026, 11, 30, 10, 0, 0, 5e8, time.UTC),
		"20261130T100000,25Z":  time.Date(2026, 11, 30, 10, 0, 0, 25e7, time.UTC),
	} {
		got, err := consumer.ParseOccurredAt(raw)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseOccurredAt(%q) = %s, %v; want %s", raw, got.Format(time.RFC3339Nano), err, want.Format(time.RFC3339Nano))
		}
	}
	for _, raw := range []string{"20261130T10", "20261130T10000", "20261330T100000", "20261130T100000X", "2026113T100000"} {
		if got, err := consumer.ParseOccurredAt(raw); err == nil {
			t.Errorf("ParseOccurredAt(%q) = %s; want an error", raw, got.Format(time.RFC3339Nano))
		}
	}
}
