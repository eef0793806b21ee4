package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// TestReviewKReplayRidesOutStreamLeaderKill runs `hookgate replay
// --dry-run` over a few thousand stored events and kills the node leading
// WEBHOOKS while it reads (the CLI is connected to another node). The
// stream elects a new leader within seconds; `hookgate status` rides out
// such an election (3 attempts of 20 s) and the trace scan now does too,
// so the operator expects replay to finish the listing as well, only
// later. jetstream/read.go Read reads with an ordered consumer (an R1
// consumer on the stream leader, gone with it) and gives up after one
// fetch of 2 s brings nothing: "no messages within 2s although some are
// pending".
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
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	var mu sync.Mutex
	var lines []string
	gotLines := make(chan struct{})
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			n := len(lines)
			mu.Unlock()
			if n >= 200 {
				once.Do(func() { close(gotLines) })
			}
		}
	}()
	_ = gotLines
	// Kill while the replay's ordered consumer on WEBHOOKS is part way.
	var readAt, last uint64
	for end := time.Now().Add(60 * time.Second); readAt == 0; time.Sleep(20 * time.Millisecond) {
		select {
		case <-scanDone:
			werr := cmd.Wait()
			mu.Lock()
			n, lastLine := len(lines), ""
			if n > 0 {
				lastLine = lines[n-1]
			}
			mu.Unlock()
			t.Fatalf("replay ended %s after its start, before its read was seen (exit %v, %d lines, the last %q):\n%s",
				time.Since(started).Round(time.Millisecond), werr, n, lastLine, errb.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatal("no replay reader seen on WEBHOOKS")
		}
		readAt, last = replayReader(t, j)
	}
	c.kill9(victim)
	killed := time.Now()
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
	t.Logf("replay ran %s, its reader seen %s after its start", time.Since(started).Round(time.Millisecond), killed.Sub(started).Round(time.Millisecond))
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

// replayReader returns how far an ordered consumer (not hookgate-apply)
// on WEBHOOKS got, 0 when there is none yet, and the stream's last seq.
func replayReader(t *testing.T, j js.JetStream) (uint64, uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := j.Stream(ctx, "WEBHOOKS")
	if err != nil {
		return 0, 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0
	}
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		if ci.Name != "hookgate-apply" && ci.Delivered.Stream > 0 && ci.Delivered.Stream < info.State.LastSeq {
			return ci.Delivered.Stream, info.State.LastSeq
		}
	}
	return 0, info.State.LastSeq
}
