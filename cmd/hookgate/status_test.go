package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

func TestStatusUnits(t *testing.T) {
	durations := []struct {
		d    time.Duration
		want string
	}{
		{0, "-"}, {720 * time.Hour, "30d"}, {96 * time.Hour, "4d"}, {36 * time.Hour, "36h"},
		{2 * time.Minute, "2m"}, {90 * time.Second, "1m30s"},
	}
	for _, tt := range durations {
		if got := shortDuration(tt.d); got != tt.want {
			t.Errorf("shortDuration(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
	sizes := []struct {
		n    uint64
		want string
	}{{0, "0 B"}, {999, "999 B"}, {1000, "1 kB"}, {1234, "1.2 kB"}, {999_960, "1 MB"}, {10e9, "10 GB"}}
	for _, tt := range sizes {
		if got := humanBytes(tt.n); got != tt.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	limits := []struct {
		n    int64
		want string
	}{{-1, "-"}, {10e9, "10 GB"}, {1 << 30, "1 GiB"}, {10 << 30, "10 GiB"}, {1e9, "1 GB"}, {1500, "1500 B"}, {2048, "2 KiB"}}
	for _, tt := range limits {
		if got := limitBytes(tt.n); got != tt.want {
			t.Errorf("limitBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// A server hookgate never provisioned: everything shows as missing.
func TestStatusShowsMissing(t *testing.T) {
	st := jetstream.Status{
		At:        time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC),
		Streams:   []jetstream.StreamStatus{{Name: "WEBHOOKS"}, {Name: "GRANTS"}, {Name: "DLQ"}, {Name: "AUDIT"}},
		Buckets:   []jetstream.BucketStatus{{Name: "WATERMARKS"}, {Name: "APPLIED"}},
		Consumers: []jetstream.ConsumerStatus{{Stream: "WEBHOOKS", Name: "hookgate-apply"}},
		Dedup:     jetstream.DedupStatus{Known: true, Horizon: 96 * time.Hour},
	}
	cfg := &config.Config{}
	cfg.NATS.Embedded.Listen = "127.0.0.1:4222"
	var out bytes.Buffer
	writeStatus(&out, st, viaListen, cfg, nil, instancesView{})
	for _, name := range []string{"WEBHOOKS", "GRANTS", "DLQ", "AUDIT", "WATERMARKS", "APPLIED", "WEBHOOKS/hookgate-apply"} {
		if !regexp.MustCompile(`(?m)^` + name + `\s+missing\s*$`).MatchString(out.String()) {
			t.Errorf("no %q missing line in:\n%s", name, out.String())
		}
	}

	b, err := json.Marshal(newStatusDoc(st, viaListen, nil))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{`"via":"nats.embedded.listen"`, `"name":"WEBHOOKS","exists":false`, `"dlq_by_provider":{}`, `"store_size":0`, `"horizon_seconds":345600`} {
		if !strings.Contains(doc, want) {
			t.Errorf("status JSON lacks %s:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "first_time") || strings.Contains(doc, "disk_use_percent") {
		t.Errorf("status JSON of missing streams has times or disk use:\n%s", doc)
	}
}

func TestTraceNewestLast(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	r := jetstream.TraceReport{
		Key: "grants:default:evt:1", Provider: "grants", Account: "default",
		Stored:  []jetstream.StoredEvent{{Seq: 7, Subject: "webhooks.grants.default", Time: t0.Add(time.Millisecond)}},
		Grants:  []jetstream.GrantEntry{{Seq: 3, Subject: "grants.grants.G-1.x", Time: t0.Add(3 * time.Millisecond)}},
		Letters: []jetstream.Letter{{Seq: 2, Subject: "dlq.grants.default", Time: t0.Add(2 * time.Millisecond), Reason: "forward: 503", Deliveries: 8, StoredSeq: 7}},
		Scans:   []jetstream.Scanned{{Stream: "WEBHOOKS", Filter: "webhooks.grants.default", Exists: true, UpToSeq: 9, Read: 4}, {Stream: "AUDIT", Filter: "audit.*.grants"}},
	}
	r.Audit = append(r.Audit, jetstream.AuditEntry{AuditSeq: 11})
	r.Audit[0].Time, r.Audit[0].Decision, r.Audit[0].Actor, r.Audit[0].Status, r.Audit[0].Seq = t0, "accepted", "gateway", 200, 7
	var out bytes.Buffer
	writeTrace(&out, r, &config.Config{}, 0)
	s := out.String()
	order := []string{"accepted", "stored", "dead letter", "published"}
	last := -1
	for _, w := range order {
		i := strings.Index(s, w)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order (want %v, oldest first):\n%s", w, order, s)
		}
		last = i
	}
	for _, want := range []string{"forward: 503; 8 deliveries, WEBHOOKS seq 7", "bucket missing (no consumer ran yet)", "AUDIT: missing", "up to seq 9: 4 read"} {
		if !strings.Contains(s, want) {
			t.Errorf("trace lacks %q:\n%s", want, s)
		}
	}
}

// The dedup line says who refuses the horizon's keys, and the key index's
// snapshot file is shown when the CLI sees data_dir.
func TestStatusShowsWhoKeepsTheHorizon(t *testing.T) {
	at := time.Now()
	tests := []struct {
		keyIndex string
		window   time.Duration
		want     string
	}{
		{jetstream.KeyIndexNone, 96 * time.Hour, "; server duplicate window 4d\n"},
		{jetstream.KeyIndexKeeps, 2 * time.Minute, "; kept by the embedded gateway's key index (JetStream's own window 2m)\n"},
		{jetstream.KeyIndexPending, 96 * time.Hour, "; server duplicate window 4d, until the key index an upgrade began has read them"},
	}
	for _, tt := range tests {
		t.Run(tt.keyIndex, func(t *testing.T) {
			dir := t.TempDir()
			cfg := &config.Config{}
			cfg.NATS.Embedded.DataDir = dir
			if tt.keyIndex != jetstream.KeyIndexNone {
				if err := os.WriteFile(filepath.Join(dir, keyIndexFile), make([]byte, 2048), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			snap := keyIndexSnapshot(cfg)
			if (snap != nil) != (tt.keyIndex != jetstream.KeyIndexNone) {
				t.Fatalf("snapshot seen: %+v", snap)
			}
			st := jetstream.Status{At: at, Dedup: jetstream.DedupStatus{Known: true, Horizon: 96 * time.Hour, Window: tt.window, KeyIndex: tt.keyIndex}}
			var out bytes.Buffer
			writeStatus(&out, st, viaDataDir, cfg, snap, instancesView{})
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("status output lacks %q:\n%s", tt.want, out.String())
			}
			if got := strings.Contains(out.String(), "key index snapshot"); got != (snap != nil) {
				t.Errorf("snapshot line shown: %v, want %v:\n%s", got, snap != nil, out.String())
			}
			b, err := json.Marshal(newStatusDoc(st, viaDataDir, snap))
			if err != nil {
				t.Fatal(err)
			}
			if want := `"key_index":"` + tt.keyIndex + `"`; !strings.Contains(string(b), want) {
				t.Errorf("status JSON lacks %s:\n%s", want, b)
			}
			if snap != nil && !strings.Contains(string(b), `"key_index_snapshot":{"path":"`) {
				t.Errorf("status JSON lacks the snapshot:\n%s", b)
			}
		})
	}
	// On a cluster there is no key index, whatever data_dir holds.
	cfg := &config.Config{}
	cfg.NATS.URL = "nats://127.0.0.1:4222"
	cfg.NATS.Embedded.DataDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.NATS.Embedded.DataDir, keyIndexFile), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s := keyIndexSnapshot(cfg); s != nil {
		t.Errorf("snapshot shown with nats.url set: %+v", s)
	}
}

// Something else where the snapshot goes (the index can then never save
// itself) is shown, not left out.
func TestStatusShowsASnapshotPathThatIsNotAFile(t *testing.T) {
	cfg := &config.Config{}
	cfg.NATS.Embedded.DataDir = t.TempDir()
	if err := os.Mkdir(filepath.Join(cfg.NATS.Embedded.DataDir, keyIndexFile), 0o755); err != nil {
		t.Fatal(err)
	}
	snap := keyIndexSnapshot(cfg)
	if snap == nil || snap.Problem == "" {
		t.Fatalf("snapshot = %+v, want its problem", snap)
	}
	st := jetstream.Status{At: time.Now(), Dedup: jetstream.DedupStatus{Known: true, Horizon: time.Hour, Window: 2 * time.Minute, KeyIndex: jetstream.KeyIndexKeeps}}
	var out bytes.Buffer
	writeStatus(&out, st, viaDataDir, cfg, snap, instancesView{})
	if want := keyIndexFile + ": not a file: the key index cannot save itself"; !strings.Contains(out.String(), want) {
		t.Errorf("status output lacks %q:\n%s", want, out.String())
	}
}

// status counts the dedup store by the running gateway's horizon, not by
// the CLI config's: with a copy of the config whose dedup.horizon is
// longer, status counted keys the gateway already accepts again as new
// (a dedup audit, stop 40).
func TestStatusCountsByTheRunningGatewaysHorizon(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	serveCfg := reviewAConfig(t, dataDir, natsAddr, "dedup: { horizon: 20s, window: 5s }\n", review6Provider)
	cliCfg := reviewAConfig(t, dataDir, natsAddr, "dedup: { horizon: 1m, window: 5s }\n", review6Provider)
	s := review7Start(t, serveCfg, true)
	if code := review6Post(t, s.base, `{"id":"e1","grant_id":"G-1","at":"2026-12-05T10:00:00Z"}`); code != 200 {
		t.Fatalf("post: %d", code)
	}
	r := review9Run(t, "", "status", "--config", cliCfg)
	if want := "1 key stored in the last 20s (WEBHOOKS seq 1-1) (the running gateway's dedup.horizon; this config says 1m)"; !strings.Contains(r.stdout, want) {
		t.Errorf("status with a config saying 1m beside a gateway keeping 20s: want %q\n%s%s", want, r.stdout, r.stderr)
	}
	j := review9Run(t, "", "status", "--json", "--config", cliCfg)
	if !strings.Contains(j.stdout, `"horizon_seconds": 20,`) {
		t.Errorf("status --json: dedup.horizon_seconds is not the running gateway's 20\n%s", j.stdout)
	}
	// The serve's own config: no remark.
	if r := review9Run(t, "", "status", "--config", serveCfg); !strings.Contains(r.stdout, "1 key stored in the last 20s (WEBHOOKS seq 1-1);") {
		t.Errorf("status with the serve's config:\n%s", r.stdout)
	}
}
