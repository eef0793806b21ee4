package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats-server/v2/server"
)

// instancePaused polls hookgate.instances until the serve named there
// (the only one with the consumer role) says whether it is paused; it
// returns once it says want.
func instancePaused(t *testing.T, c *jetstream.Conn, want bool) instanceDoc {
	t.Helper()
	var last []instanceDoc
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		answers, _ := jetstream.AskInstances(t.Context(), c, jetstream.AskOptions{Wait: 2 * time.Second, Quiet: 300 * time.Millisecond})
		last = last[:0]
		for _, a := range answers {
			var d instanceDoc
			if json.Unmarshal(a, &d) == nil && slices.Contains(d.Roles, "consumer") {
				last = append(last, d)
				if d.Paused == want {
					return d
				}
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no serve with the consumer role said paused=%v within 30 s: %+v", want, last)
		}
	}
}

// TestServeStartingDuringABackupDoesNotApply: a backup that found no serve
// with the consumer role to pause (only a gateway ran) reads the streams;
// a consumer that starts meanwhile takes the backup's pause from its
// announcement before it applies anything (it used to apply for the whole
// backup: with no consumer found, nothing was ever sent; a renewal alone
// would reach it only seconds after it applied what was waiting), and
// applies the waiting events once the backup resumes.
func TestServeStartingDuringABackupDoesNotApply(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	serveWith := func(roles string, wait bool) *review7Serve {
		cfg := filepath.Join(t.TempDir(), "hookgate.yaml")
		yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: %s\nnats: { url: %q }\n%s", roles, srv.ClientURL(), review6Provider)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return review7Start(t, cfg, wait)
	}
	gw := serveWith("{ consumer: false }", true)
	client := &http.Client{Timeout: 10 * time.Second}
	_, body := backupEvent(1)
	if code, status, err := backupPost(client, gw.base, body); err != nil || code != 200 || status != "accepted" {
		t.Fatalf("post: %d %q %v", code, status, err)
	}

	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "backup", URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	paused, resume, err := pauseConsumers(t.Context(), &system{conn: c}, io.Discard)
	if err != nil || len(paused) != 0 {
		t.Fatalf("with no consumer running: paused %v, %v", paused, err)
	}
	defer resume()

	s := serveWith("{ gateway: false, consumer: true }", false)
	if d := instancePaused(t, c, true); d.Applying {
		t.Fatalf("the consumer started during the backup applies: %+v", d)
	}
	// Told paused, and (checked after) nothing delivered: the waiting
	// event was not applied.
	ci, err := c.JS.Consumer(t.Context(), jetstream.StreamWebhooks, jetstream.DurableApply)
	if err == nil {
		info, err := ci.Info(t.Context())
		if err != nil || info.Delivered.Stream != 0 {
			t.Fatalf("the consumer started during the backup took events: %+v, %v", info, err)
		}
	}
	if keys, err := readKeys(t, c, jetstream.StreamGrants); err == nil && len(keys) > 0 {
		t.Fatalf("applied while the backup reads: GRANTS %v", keys)
	}

	resume()
	instancePaused(t, c, false)
	waitApplied(t, c, s)
	if keys, err := readKeys(t, c, jetstream.StreamGrants); err != nil || !slices.Equal(keys, []string{"p:default:evt:e-00001"}) {
		t.Fatalf("after the backup: GRANTS %v, %v", keys, err)
	}
}

// TestReplayAndBackupRefuseEachOther: `replay` and `dlq replay` apply
// events, so one run while a backup reads the streams would leave part of
// its work in the backup (the README only said not to): each refuses
// while a backup runs, changing nothing, and a backup refuses while one of
// them runs. Dry runs change nothing and go on.
func TestReplayAndBackupRefuseEachOther(t *testing.T) {
	listen := review9gFreeAddr(t)
	cfg := backupConfig(t, t.TempDir(), listen)
	s := review7Start(t, cfg, true)
	client := &http.Client{Timeout: 10 * time.Second}
	_, body := backupEvent(1)
	if code, _, err := backupPost(client, s.base, body); err != nil || code != 200 {
		t.Fatalf("post: %d %v", code, err)
	}
	c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "test", URL: "nats://" + listen, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitApplied(t, c, s)
	sys := &system{conn: c}

	paused, resume, err := pauseConsumers(t.Context(), sys, io.Discard)
	if err != nil || len(paused) != 1 {
		t.Fatalf("pause: %v, %v", paused, err)
	}
	for _, args := range [][]string{
		{"replay", "--config", cfg, "--since", "1h"},
		{"dlq", "replay", "--all", "--config", cfg},
	} {
		r := review9Run(t, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "a hookgate backup is reading the streams") || !strings.Contains(r.stderr, "nothing changed") {
			t.Errorf("%s during a backup: exit %d\n%s%s", strings.Join(args[:2], " "), r.code, r.stdout, r.stderr)
		}
	}
	if r := review9Run(t, "", "replay", "--config", cfg, "--since", "1h", "--dry-run"); r.code != 0 {
		t.Errorf("replay --dry-run during a backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	resume()

	// A replay runs (announced as the command does): a backup refuses.
	stop, err := announceApplying(t.Context(), sys, "replay", io.Discard)
	if err != nil {
		t.Fatalf("with the backup over, replay refused: %v", err)
	}
	out := filepath.Join(t.TempDir(), "backup")
	r := review9Run(t, "", "backup", "--config", cfg, "--out", out)
	if r.code != 1 || !strings.Contains(r.stderr, "'hookgate replay' on "+instanceName()) || !strings.Contains(r.stderr, "back up after it ends") {
		t.Fatalf("backup during a replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused backup left %s (%v)", out, err)
	}
	stop()
	instancePaused(t, c, false)
	if r := review9Run(t, "", "replay", "--config", cfg, "--since", "1h"); r.code != 0 || !strings.Contains(r.stdout, "already-applied") {
		t.Fatalf("replay after the backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := review9Run(t, "", "backup", "--config", cfg, "--out", out); r.code != 0 {
		t.Fatalf("backup after the replay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
