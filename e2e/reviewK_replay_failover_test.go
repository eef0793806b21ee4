package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// TestReviewKReplayRidesOutStreamLeaderKill runs `hookgate replay
// --dry-run` over a few thousand stored events and kills the node leading
// WEBHOOKS while it reads (the CLI is connected to another node). The
// stream elects a new leader within seconds; `hookgate status` rides out
// such an election (3 attempts of 20 s) and the trace scan now does too,
// so the operator expects replay to finish the listing as well, only
// later. (Review K found Read giving up after one fetch of 2 s brought
// nothing; a CI run later saw nats.go's ordered consumer never pull again
// after re-creating its consumer. Read's consumer is an R1 consumer on the
// stream leader, gone with it: Read re-creates it where it stopped.)
func TestReviewKReplayRidesOutStreamLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	j := c.client()
	victim, home := c.victimAndHome(j)
	hg := startServe(t, "gw", writeClusterConfig(t, clusterConfig{natsURL: c.URL(), roles: "{ gateway: true, consumer: false }"}))
	l := newLoad(t, "replay", []string{hg.baseURL})
	l.pace = 0
	l.maxSent = 3000
	l.run(8)
	l.wg.Wait()
	if l.gaveUp != nil || l.problems != nil {
		t.Fatalf("storing: gave up %d, problems %v", len(l.gaveUp), l.problems)
	}
	c.placeAllBut(j, home.name, map[string]string{"WEBHOOKS": victim.name})
	for _, s := range []string{"WEBHOOKS"} {
		c.waitReplicasCurrent(j, s, 30*time.Second)
	}

	// The CLI's config: the same, connected to the other nodes only.
	cfg := writeClusterConfig(t, clusterConfig{natsURL: c.urlWithout(victim), roles: "{ gateway: true, consumer: false }"})
	cmd := exec.Command(binary, "replay", "--config", cfg, "--dry-run")
	var errb syncBuffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The replay's reader is found by its consumer's creation advisory,
	// watched until its first batch is delivered, and the replay frozen
	// (SIGSTOP) until the kill is done: a read of 3000 events can end
	// before a poll of all the stream's consumers sees it (one run of this
	// test did not see it before the replay ended).
	created := make(chan string, 4)
	sub, err := j.Conn().Subscribe("$JS.EVENT.ADVISORY.CONSUMER.CREATED.WEBHOOKS.>", func(m *nats.Msg) {
		var adv struct {
			Consumer string `json:"consumer"`
		}
		if json.Unmarshal(m.Data, &adv) == nil {
			select {
			case created <- adv.Consumer:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := j.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // frozen, should the test end early
	started := time.Now()
	var mu sync.Mutex
	var lines []string
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	ended := func() {
		t.Helper()
		werr := cmd.Wait()
		mu.Lock()
		n, lastLine := len(lines), ""
		if n > 0 {
			lastLine = lines[n-1]
		}
		mu.Unlock()
		t.Fatalf("replay ended %s after its start, before its read was seen (exit %v, %d lines, the last %q):\n%s",
			time.Since(started).Round(time.Millisecond), werr, n, lastLine, errb.String())
	}
	// Kill while the replay's reader on WEBHOOKS is part way.
	var name string
	select {
	case <-scanDone:
		ended()
	case <-time.After(60 * time.Second):
		t.Fatal("no consumer created on WEBHOOKS by the replay within 60 s")
	case name = <-created:
	}
	var readAt, last uint64
	for end := time.Now().Add(30 * time.Second); readAt == 0; time.Sleep(2 * time.Millisecond) {
		select {
		case <-scanDone:
			ended()
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("the replay's consumer %s delivered nothing within 30 s", name)
		}
		readAt, last = delivered(t, j, name)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		ended()
	}
	c.kill9(victim)
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A replay still running 90 s after the kill (an election takes
	// seconds) is stuck: dump its goroutines (SIGQUIT) to say where.
	stuck := time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Signal(syscall.SIGQUIT) })
	defer stuck.Stop()
	mu.Lock()
	atKill := len(lines)
	mu.Unlock()
	<-scanDone
	werr := cmd.Wait()
	took := time.Since(killed)
	t.Logf("replay ran %s, its reader killed under %s after its start", time.Since(started).Round(time.Millisecond), killed.Sub(started).Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	t.Logf("replay's reader had been delivered up to seq %d of %d when the kill came", readAt, last)
	dump := errb.String()
	if i := strings.Index(dump, "goroutine "); i >= 0 {
		path := keepLog(t, "replay-goroutines", dump)
		dump = dump[:i] + "[goroutine dump in " + path + "]"
	}
	t.Logf("replay had printed %d lines when %s (WEBHOOKS leader) was killed; it printed %d in all, ending %s after the kill; exit %v; stderr: %s",
		atKill, victim.name, len(lines), took.Round(time.Millisecond), werr, strings.TrimSpace(dump))
	if len(lines) > 0 {
		t.Logf("last line: %s", lines[len(lines)-1])
	}
	for _, ln := range lines {
		if strings.Contains(ln, "failed") && !strings.HasPrefix(ln, "dry run") {
			t.Logf("failed: %s", ln)
		}
	}
	if readAt >= last {
		t.Fatal("the kill came after the read: the fault did not hit")
	}
	if werr != nil || !strings.Contains(strings.Join(lines, "\n"), "dry run") {
		t.Errorf("replay --dry-run over %d stored events, the WEBHOOKS leader's node killed mid-read: exit %v after %s (%s); want it to wait out the election (seconds) and list every event",
			len(l.events), werr, took.Round(time.Second), tailString(dump, 3))
	}
}

// delivered returns how far consumer name on WEBHOOKS got (0 when it
// cannot tell) and the stream's last seq.
func delivered(t *testing.T, j js.JetStream, name string) (uint64, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "WEBHOOKS")
	if err != nil {
		return 0, 0
	}
	c, err := s.Consumer(ctx, name)
	if err != nil {
		return 0, 0
	}
	return c.CachedInfo().Delivered.Stream, s.CachedInfo().State.LastSeq
}
