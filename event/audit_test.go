package event

import (
	"strings"
	"testing"
	"time"
)

func TestAuditRecordsDecodesJSONLines(t *testing.T) {
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name, body string
		keys       []string
		wantErr    string
	}{
		{"one record, no newline", `{"key":"a","time":"2026-12-01T04:00:00Z"}`, []string{"a"}, ""},
		{"several, newline-terminated", "{\"key\":\"a\"}\n{\"key\":\"b\"}\n", []string{"a", "b"}, ""},
		{"blank lines skipped", "\n{\"key\":\"a\"}\n\n{\"key\":\"b\"}", []string{"a", "b"}, ""},
		{"empty", "", nil, ""},
		{"bad second line", "{\"key\":\"a\"}\n{oops}\n", []string{"a"}, "audit record 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := AuditRecords([]byte(tt.body))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			var keys []string
			for _, r := range recs {
				keys = append(keys, r.Key)
			}
			if strings.Join(keys, ",") != strings.Join(tt.keys, ",") {
				t.Fatalf("keys = %v, want %v", keys, tt.keys)
			}
			if tt.name == "one record, no newline" && !recs[0].Time.Equal(at) {
				t.Fatalf("time = %v, want %v", recs[0].Time, at)
			}
		})
	}
}

func TestExpiredRangeReadsExpiredReason(t *testing.T) {
	if got := ExpiredReason(7, 7); got != "WEBHOOKS seq 7 (1 event) left the stream at its max_age before it was applied" {
		t.Errorf("ExpiredReason(7, 7) = %q", got)
	}
	for _, r := range [][2]uint64{{2, 3}, {7, 7}, {1, 1 << 40}} {
		first, last, ok := ExpiredRange(ExpiredReason(r[0], r[1]))
		if !ok || first != r[0] || last != r[1] {
			t.Errorf("ExpiredRange(ExpiredReason(%d, %d)) = %d, %d, %v", r[0], r[1], first, last, ok)
		}
	}
	for _, bad := range []string{"", "WEBHOOKS seq 3-2 (0 events)", "seq 2-3", "WEBHOOKS seq x-3 ", "WEBHOOKS seq 0 (1 event) "} {
		if _, _, ok := ExpiredRange(bad); ok {
			t.Errorf("ExpiredRange(%q) ok", bad)
		}
	}
}
