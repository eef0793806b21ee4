package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

// An event without a subject shows its key shard and who holds its lease,
// in the text and in --json, instead of a watermark it does not have.
func TestTraceShowsKeyShard(t *testing.T) {
	const key = "gh:default:dig:1"
	report := func(lease string) jetstream.TraceReport {
		return jetstream.TraceReport{Key: key, Provider: "gh", Account: "default",
			Watermark: &jetstream.WatermarkState{Key: "gh.=K.17", Shard: true, Exists: true, LeaseOwner: "host/1/x", LeaseKey: lease}}
	}
	for _, tt := range []struct{ lease, want string }{
		{key, "key shard  gh.=K.17: leased to this key"},
		{"gh:default:dig:2", "key shard  gh.=K.17: leased to gh:default:dig:2"},
		{"", "key shard  gh.=K.17: free"},
	} {
		var b bytes.Buffer
		writeTrace(&b, report(tt.lease), &config.Config{})
		if out := b.String(); !strings.Contains(out, tt.want) || strings.Contains(out, "watermark") {
			t.Errorf("lease %q: trace output lacks %q (or names a watermark):\n%s", tt.lease, tt.want, out)
		}
	}
	j, err := json.Marshal(newTraceDoc(report(key)))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"watermark":{"key":"gh.=K.17","shard":true,"exists":true,"keys":[],"key_at_mark":false,"lease_owner":"host/1/x","lease_key":"` + key + `"}`; !strings.Contains(string(j), want) {
		t.Errorf("--json lacks %s:\n%s", want, j)
	}
}

// A subject whose entry holds only a lease (its first event dead-lettered
// or waiting for its retry) says so instead of printing a zero time.
func TestTraceWatermarkWithoutAppliedEvent(t *testing.T) {
	r := jetstream.TraceReport{Key: "gg:default:evt:1", Provider: "gg", Account: "default",
		Watermark: &jetstream.WatermarkState{Key: "gg.default.G-2", Exists: true}}
	var b bytes.Buffer
	writeTrace(&b, r, &config.Config{})
	if out := b.String(); !strings.Contains(out, "gg.default.G-2: no event applied yet") || strings.Contains(out, "0001-01-01") {
		t.Errorf("trace output:\n%s", out)
	}
}

// Under ordering none the subject's entry holds only the lease its
// effects run under: trace says so, not "no event applied yet" next to the
// applied event it has just shown (review R).
func TestTraceUnorderedSubjectShowsItsLease(t *testing.T) {
	cfg := &config.Config{Providers: map[string]config.Provider{"gh": {Name: "gh", Ordering: config.OrderingNone}}}
	for _, tt := range []struct{ lease, want string }{
		{"", "subject lease  gh.acme.o=2Fr: free (ordering none: no watermark time)"},
		{"gh:acme:evt:2", "subject lease  gh.acme.o=2Fr: leased to gh:acme:evt:2"},
	} {
		r := jetstream.TraceReport{Key: "gh:acme:evt:1", Provider: "gh", Account: "acme",
			Watermark: &jetstream.WatermarkState{Key: "gh.acme.o=2Fr", Exists: true, LeaseKey: tt.lease}}
		var b bytes.Buffer
		writeTrace(&b, r, cfg)
		if out := b.String(); !strings.Contains(out, tt.want) || strings.Contains(out, "no event applied yet") || strings.Contains(out, "\nwatermark") {
			t.Errorf("lease %q: trace output lacks %q (or speaks of a watermark):\n%s", tt.lease, tt.want, out)
		}
	}
}

// A subject with a control byte (stored raw by an older version, or read
// back exact from its quoted form) is printed Go-quoted: raw, a newline
// would break trace's table.
func TestTracePrintsControlBytesQuoted(t *testing.T) {
	r := jetstream.TraceReport{Key: "gg:default:evt:1", Provider: "gg", Account: "default",
		Stored: []jetstream.StoredEvent{{Seq: 1, Subject: "webhooks.gg.default", EventSubject: "G\n4", Type: "award\r\nx"}}}
	var b bytes.Buffer
	writeTrace(&b, r, &config.Config{})
	out := b.String()
	if !strings.Contains(out, `subject "G\n4", type "award\r\nx"`) || strings.Contains(out, "G\n4") {
		t.Errorf("trace output:\n%s", out)
	}
}

// An absent mark says it may have been pruned, so an operator who finds
// an old event's subject without a watermark knows where to look.
func TestTraceAbsentWatermarkMentionsPrune(t *testing.T) {
	r := jetstream.TraceReport{Key: "gg:default:evt:1", Provider: "gg", Account: "default",
		Watermark: &jetstream.WatermarkState{Key: "gg.default.G-2"}}
	var b bytes.Buffer
	writeTrace(&b, r, &config.Config{})
	if out := b.String(); !strings.Contains(out, "gg.default.G-2: none (no event of the subject applied, or pruned: see AUDIT watermark-pruned)") {
		t.Errorf("trace output:\n%s", out)
	}
}
