package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// reviewIAnswer makes a connection of its own to env answer on
// hookgate.instances as serve does,
// with serve's reporter around ready (what /readyz checks), its checks
// running in the background as serve's do.
func reviewIAnswer(t *testing.T, env *jstest.Env, ready func(context.Context) error) {
	t.Helper()
	conn, err := jetstream.Connect(jetstream.ConnectOptions{Name: "serve", Embedded: env.Embedded})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	cfg := &config.Config{}
	cfg.Roles.Gateway = true
	r := newInstanceReporter(cfg, nil, time.Now(), ready, nil)
	stop, err := jetstream.AnswerInstances(conn, r.report)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// The answer waits for /readyz's check, which asks JetStream (sys.Ready:
// one STREAM.INFO per stream) under a 2 s deadline; status waits 2 s for
// answers. A serve whose JetStream requests go unanswered (a frozen or
// partitioned stream leader: nats.go waits out the context) thus answers
// just after status stopped listening, and status says no serve runs,
// or that permissions deny the subject, about a live serve that is not
// ready: the case the listing exists for. Here ready does what
// sys.Ready does when JetStream does not answer: it returns at its
// context's deadline.
func TestReviewIStatusListsAServeWhoseJetStreamHangs(t *testing.T) {
	env := jstest.Start(t, "")
	reviewIAnswer(t, env, func(ctx context.Context) error {
		<-ctx.Done() // JS.Stream(ctx, ...) with no answer from JetStream
		return fmt.Errorf("jetstream %s: %w", jetstream.StreamWebhooks, ctx.Err())
	})

	start := time.Now()
	v := askInstances(t.Context(), &system{conn: env.Conn}, viaURL)
	t.Logf("status's instances after %s: %+v", time.Since(start).Round(time.Millisecond), v)
	if len(v.Docs) != 1 || v.Docs[0].Ready {
		var out bytes.Buffer
		writeInstances(&out, v)
		t.Fatalf("a running serve whose JetStream does not answer is not listed (not ready); status shows:\n%s", out.String())
	}
}

// Answers are made one at a time (one subscription, whose callback runs
// the readiness check): with JetStream slow but answering (here 700 ms a
// check, well within the report's own 2 s), a few `hookgate status` runs
// at once (two operators, a monitoring loop) queue behind each other and
// the later ones hear nothing within their 2 s.
func TestReviewIConcurrentStatusRunsAllHearTheServe(t *testing.T) {
	env := jstest.Start(t, "")
	reviewIAnswer(t, env, func(ctx context.Context) error {
		select {
		case <-time.After(700 * time.Millisecond): // a slow JetStream API
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	// The serve's first check has answered (700 ms after its start).
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if v := askInstances(t.Context(), &system{conn: env.Conn}, viaListen); len(v.Docs) == 1 && v.Docs[0].Ready {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the serve never answered ready")
		}
	}
	const runs = 4
	var wg sync.WaitGroup
	views := make([]instancesView, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := jetstream.Connect(jetstream.ConnectOptions{Name: fmt.Sprintf("status-%d", i), Embedded: env.Embedded})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			views[i] = askInstances(t.Context(), &system{conn: c}, viaListen)
		}()
	}
	wg.Wait()
	heard := 0
	for i, v := range views {
		if len(v.Docs) == 1 && v.Docs[0].Ready {
			heard++
		} else {
			t.Logf("status run %d: %+v", i, v)
		}
	}
	if heard != runs {
		t.Fatalf("%d of %d concurrent status runs listed the (ready) serve; the others said none", heard, runs)
	}
}

// A hostile or broken answer on hookgate.instances (anything may
// subscribe to the subject) must not reach the operator's terminal with
// control characters: printable escapes bytes below 0x20 and 0x7f only,
// so C1 controls (U+009B is CSI on xterm and others: U+009B "2J" clears
// the screen) pass through in valid JSON, and a raw 0x9b byte in an
// answer that is not JSON passes through as is.
func TestReviewIStatusEscapesControlsFromAnswers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer []byte
	}{
		{"json C1", []byte(`{"instance":"evil\u009b2J\u009b1;1H","version":"v\u009b31m","roles":["gateway"],"problem":"\u009d0;pwned\u0007 \u202egnp.exe"}`)},
		{"not json raw 0x9b", []byte("\x9b2J\x9b1;1Hnot a serve")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := jstest.Start(t, "")
			sc, err := jetstream.Connect(jetstream.ConnectOptions{Name: "stranger", Embedded: env.Embedded})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sc.Close)
			stranger := sc.NC
			if _, err := stranger.Subscribe(jetstream.SubjectInstances, func(m *nats.Msg) { _ = m.Respond(tt.answer) }); err != nil {
				t.Fatal(err)
			}
			if err := stranger.Flush(); err != nil {
				t.Fatal(err)
			}
			v := askInstances(t.Context(), &system{conn: env.Conn}, viaURL)
			var out bytes.Buffer
			writeInstances(&out, v)
			s := out.String()
			for i, r := range s {
				bad := r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") ||
					r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r))
				if bad {
					t.Fatalf("status prints %U at byte %d of an answer's text:\n%q", r, i, s)
				}
			}
		})
	}
}

// The README documents serves beside the embedded one on its NATS (a
// consumer-only serve with nats.url pointed at nats.embedded.listen, or a
// gateway beside a consumer-only embedded hookgate). status through the
// embedded listen stops at the first answer ("one serve at most"), so it
// lists one of them and drops the other: which one is a race, and the
// dropped one may be the embedded serve whose store stopped writing.
func TestReviewIStatusListsEveryServeOnTheEmbeddedServer(t *testing.T) {
	dataDir, natsListen := t.TempDir(), freeAddr(t)
	embeddedCfg := review7Config(t, dataDir, natsListen, "", "")
	a := review7Start(t, embeddedCfg, true)

	remoteCfg := filepath.Join(t.TempDir(), "remote.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { gateway: false, consumer: true }\nnats: { url: \"nats://tok@%s\" }\n%s", natsListen, review6Provider)
	if err := os.WriteFile(remoteCfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	review7Start(t, remoteCfg, false)

	// Both answer on the subject (asked with no limit, as on a cluster).
	nc, err := nats.Connect("nats://tok@" + natsListen)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		answers, _ := jetstream.AskInstances(t.Context(), &jetstream.Conn{NC: nc}, jetstream.AskOptions{Wait: 2 * time.Second, Quiet: 500 * time.Millisecond})
		if len(answers) == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the two serves never both answered: %q", answers)
		}
	}

	r := review9Run(t, "", "status", "--json", "--config", embeddedCfg)
	var d struct {
		Instances []instanceDoc `json:"instances"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); r.code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if len(d.Instances) != 2 {
		t.Fatalf("status through nats.embedded.listen lists %d of the 2 running serves: %+v (the embedded one listens on %s)", len(d.Instances), d.Instances, a.base)
	}
}

// NATS permissions that deny serve's user the subject refuse the
// subscription after Subscribe returned (the server's -ERR arrives
// asynchronously), so answerInstances's promise, "a serve that cannot
// subscribe still runs (it logs why)", does not hold: serve's JSON log
// says nothing; only nats.go's default error handler writes a bare
// "nats: permissions violation ..." line to the process's stderr, outside
// the logger (not JSON, no level, not in the injected stderr), and the
// operator otherwise learns it only from status's guess "(no serve
// running, or NATS permissions deny ...)".
func TestReviewIServeLogsASubscriptionThePermissionsDeny(t *testing.T) {
	srv := reviewTNATS(t, &server.Options{
		JetStream: true,
		StoreDir:  t.TempDir(),
		Users: []*server.User{{
			Username: "hg", Password: "pw",
			Permissions: &server.Permissions{
				Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{jetstream.SubjectInstances}},
			},
		}},
	})
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://hg:pw@", 1)
	path := filepath.Join(t.TempDir(), "hookgate.yaml")
	yaml := fmt.Sprintf("http: { listen: \"127.0.0.1:0\" }\nroles: { consumer: false }\nnats: { url: %q }\n%s", url, review6Provider)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := review7Start(t, path, true)

	// The subscription is refused: status hears that nothing subscribes.
	v := askInstances(t.Context(), &system{conn: func() *jetstream.Conn {
		c, err := jetstream.Connect(jetstream.ConnectOptions{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}()}, viaURL)
	if len(v.Docs) != 0 {
		t.Fatalf("the denied subscription answered: %+v", v.Docs)
	}
	t.Logf("status says: %s", v.None)
	for end := time.Now().Add(5 * time.Second); !strings.Contains(s.stderr.String(), "hookgate status will not list this instance"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("serve, whose subscription to %s the server refused, never logged that status will not list it:\n%s", jetstream.SubjectInstances, tail(s.stderr.String(), 3000))
		}
	}
}
