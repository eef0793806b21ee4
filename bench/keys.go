package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Memory per tracked key is measured in a process of its own (the
// "keys-fill" child): an embedded server with a WEBHOOKS-like stream
// (file store, 96 h duplicate window, so every id stays in the server's
// dedup map), baseline RSS, N publishes with Nats-Msg-Id, then RSS again
// once the file store's block caches have expired. Then a GRANTS-like
// stream gets the ids a steady rate leaves in its window: hookgate's
// consumer publishes every applied event to GRANTS with Nats-Msg-Id = key,
// and GRANTS keeps a duplicate window of grantsWindow (dedup.window, 2 m,
// where every provider publishes the sequenced way, as the default
// config's do) out of the 96 h horizon, so at a steady rate it holds
// 1/2880 of the tracked keys. (GRANTS's older messages cost disk, not
// memory; a restart re-reads only the window's.)
// Optionally an APPLIED-like KV bucket (one subject per key, TTL =
// horizon) is filled the same way: providers that remember applied keys
// there (ordering none, and the like) pay that too.

const (
	keysStream  = "KEYS"
	keysSubject = "webhooks.bench.acct-1"
	// keysGrants is the GRANTS-like stream.
	keysGrants        = "GRANTSBENCH"
	keysGrantsSubject = "grants.bench.G-1-1.grant=2Eupdated"
	// grantsWindow is GRANTS's duplicate window with serve's defaults
	// (cmd/hookgate's grantsWindow), keysHorizon the horizon.
	grantsWindow = 2 * time.Minute
	keysHorizon  = 96 * time.Hour
	keysBucket   = "APPLIEDBENCH"
	// KeysResultPrefix starts the one stdout line a keys child answers with.
	KeysResultPrefix = "keys-result: "
	// KeysReadyLine is what the restart child prints the moment the old id
	// comes back as a duplicate, so the parent can time spawn-to-ready.
	KeysReadyLine = "keys-ready"
)

// KeyID is the idempotency key of the i-th tracked event, shaped like a
// hookgate key: provider:account:evt:id (45 bytes).
func KeyID(i int) string { return fmt.Sprintf("bench:acct-1:evt:evt_%023d", i) }

// appliedKey mirrors the APPLIED bucket's key: 24 base64url characters.
func appliedKey(i int) string { return fmt.Sprintf("k%023d", i) }

// KeysFillOptions configure the fill child.
type KeysFillOptions struct {
	Dir      string
	N        int
	BodySize int
	Settle   time.Duration // wait for block caches to expire before the reading
	Applied  bool          // also fill an APPLIED-like KV bucket with N keys
}

// KeysFill is what the fill child measured.
type KeysFill struct {
	N           int     `json:"n"`
	IDBytes     int     `json:"id_bytes"`
	BodyBytes   int     `json:"body_bytes"`
	FillSeconds float64 `json:"fill_seconds"`
	FillRate    float64 `json:"fill_msgs_per_s"`
	RSSBase     int64   `json:"rss_base"`
	RSSAfter    int64   `json:"rss_after"`
	HeapBase    uint64  `json:"heap_base"`
	HeapAfter   uint64  `json:"heap_after"`
	BytesPerKey float64 `json:"rss_bytes_per_key"`
	HeapPerKey  float64 `json:"heap_bytes_per_key"`
	DiskBytes   int64   `json:"disk_bytes"`
	StreamMsgs  uint64  `json:"stream_msgs"`
	// GRANTS-like window: the ids a steady rate leaves in it (N x 2 m /
	// 96 h), RSS after it was filled too, and its share per tracked key.
	GrantsN       int     `json:"grants_n"`
	GrantsRSS     int64   `json:"grants_rss_after"`
	GrantsPerKey  float64 `json:"grants_rss_bytes_per_key"`
	GrantsHeap    float64 `json:"grants_heap_bytes_per_key"`
	AppliedN      int     `json:"applied_n,omitempty"`
	AppliedRSS    int64   `json:"applied_rss_after,omitempty"`
	AppliedPerKey float64 `json:"applied_rss_bytes_per_key,omitempty"`
	AppliedHeap   float64 `json:"applied_heap_bytes_per_key,omitempty"`
	PeakRSS       int64   `json:"rss_peak"`
}

func settledMemory(settle time.Duration) (rss int64, heap uint64) {
	time.Sleep(settle)
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(500 * time.Millisecond)
	m, _ := ReadMemory(os.Getpid())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return m.RSS, ms.HeapInuse
}

func keysHeaders(key string) nats.Header {
	return nats.Header{
		"Hookgate-Key":         {key},
		"Hookgate-Provider":    {"bench"},
		"Hookgate-Account":     {"acct-1"},
		"Hookgate-Received-At": {"2026-01-02T03:04:05.123456789Z"},
		"Hookgate-Subject":     {"G-1-1"},
		"Hookgate-Occurred-At": {"2026-01-02T03:04:05.1Z"},
		"Hookgate-Type":        {"grant.updated"},
		"Content-Type":         {"application/json"},
		"User-Agent":           {"hookgate-bench"},
		"X-Signature":          {"sha256=0000000000000000000000000000000000000000000000000000000000000000"},
	}
}

// RunKeysFill is the fill child: it fills, prints one KeysResultPrefix
// line of JSON, then waits for a line on stdin before shutting the server
// down cleanly (the parent kills it instead to measure a crash restart).
func RunKeysFill(ctx context.Context, o KeysFillOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	ns, err := StartEmbeddedServer(o.Dir, 8<<20, 0, "")
	if err != nil {
		return err
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		return err
	}
	j, err := js.New(nc, js.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	sc := FloorStream(4 << 20)
	sc.Name, sc.Subjects, sc.MaxBytes = keysStream, []string{"webhooks.>"}, -1
	if _, err := j.CreateStream(ctx, sc); err != nil {
		return err
	}
	gc := FloorStream(4 << 20)
	gc.Name, gc.Subjects, gc.MaxBytes, gc.Duplicates = keysGrants, []string{"grants.>"}, -1, grantsWindow
	if _, err := j.CreateStream(ctx, gc); err != nil {
		return err
	}
	if o.Applied {
		// APPLIED's settings (jetstream.ProvisionKV): history 1, TTL = horizon.
		if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: keysBucket, History: 1, TTL: 96 * time.Hour, Storage: js.FileStorage}); err != nil {
			return err
		}
	}
	body := Body("evt_x", "G-1-1", time.Now(), o.BodySize)
	res := KeysFill{N: o.N, IDBytes: len(KeyID(0)), BodyBytes: len(body)}
	res.RSSBase, res.HeapBase = settledMemory(time.Second)

	fill := func(what string, n int, msg func(i int) *nats.Msg, opt func(i int) []js.PublishOpt) error {
		for i := range n {
			// A stall (4096 acks outstanding for longer than the stall
			// wait, as when the store flushes a block) is back-pressure:
			// wait and publish the same message again.
			for {
				_, err := j.PublishMsgAsync(msg(i), opt(i)...)
				if err == nil {
					break
				}
				if !errors.Is(err, js.ErrTooManyStalledMsgs) {
					return fmt.Errorf("publish %d: %w", i, err)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
			if (i+1)%1_000_000 == 0 {
				fmt.Fprintf(stderr, "keys: %d %s published\n", i+1, what)
			}
		}
		select {
		case <-j.PublishAsyncComplete():
		case <-time.After(5 * time.Minute):
			return errors.New("async publishes not acknowledged within 5m")
		}
		return nil
	}
	start := time.Now()
	err = fill("WEBHOOKS ids", o.N, func(i int) *nats.Msg {
		return &nats.Msg{Subject: keysSubject, Header: keysHeaders(KeyID(i)), Data: body}
	}, func(i int) []js.PublishOpt { return []js.PublishOpt{js.WithMsgID(KeyID(i))} })
	if err != nil {
		return err
	}
	res.FillSeconds = time.Since(start).Seconds()
	res.FillRate = float64(o.N) / res.FillSeconds
	st, err := j.Stream(ctx, keysStream)
	if err != nil {
		return err
	}
	res.StreamMsgs = st.CachedInfo().State.Msgs
	res.RSSAfter, res.HeapAfter = settledMemory(o.Settle)
	res.BytesPerKey = float64(res.RSSAfter-res.RSSBase) / float64(o.N)
	res.HeapPerKey = (float64(res.HeapAfter) - float64(res.HeapBase)) / float64(o.N)
	res.DiskBytes = dirSize(filepath.Join(o.Dir, "jetstream"))
	res.GrantsN = max(1, int(int64(o.N)*int64(grantsWindow)/int64(keysHorizon)))
	err = fill("GRANTS ids", res.GrantsN, func(i int) *nats.Msg {
		return &nats.Msg{Subject: keysGrantsSubject, Header: keysHeaders(KeyID(i)), Data: body}
	}, func(i int) []js.PublishOpt { return []js.PublishOpt{js.WithMsgID(KeyID(i))} })
	if err != nil {
		return err
	}
	rssG, heapG := settledMemory(o.Settle)
	res.GrantsRSS = rssG
	res.GrantsPerKey = float64(rssG-res.RSSAfter) / float64(o.N)
	res.GrantsHeap = (float64(heapG) - float64(res.HeapAfter)) / float64(o.N)
	if o.Applied {
		val := []byte(KeyID(0))
		err = fill("APPLIED entries", o.N, func(i int) *nats.Msg {
			return &nats.Msg{Subject: "$KV." + keysBucket + "." + appliedKey(i), Data: val}
		}, func(int) []js.PublishOpt { return nil })
		if err != nil {
			return err
		}
		rss, heap := settledMemory(o.Settle)
		res.AppliedN = o.N
		res.AppliedRSS = rss
		res.AppliedPerKey = float64(rss-res.GrantsRSS) / float64(o.N)
		res.AppliedHeap = (float64(heap) - float64(heapG)) / float64(o.N)
	}
	m, _ := ReadMemory(os.Getpid())
	res.PeakRSS = m.Peak
	b, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s%s\n", KeysResultPrefix, b)
	// Wait for the parent: a line means stop cleanly; a kill is a crash.
	_, _ = bufio.NewReader(stdin).ReadString('\n')
	nc.Close()
	ns.Shutdown()
	ns.WaitForShutdown()
	return nil
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// KeysRestart is what a restart child measured, from the start of the
// server in its process.
type KeysRestart struct {
	After          string  `json:"after"` // "crash" or "clean stop"
	ServerReady    float64 `json:"server_ready_s"`
	JetStreamReady float64 `json:"jetstream_ready_s"`
	DuplicateOK    float64 `json:"old_id_duplicate_s"` // restart-to-ready
	ProcessReady   float64 `json:"process_spawn_to_ready_s"`
	RSSAtReady     int64   `json:"rss_at_ready"`
	// RSS is read once the block caches the recovery loaded have expired;
	// it holds every store of the fill: per event, the WEBHOOKS id and,
	// when filled, the APPLIED-like entry.
	RSS         int64   `json:"rss_after_restart"`
	BytesPerKey float64 `json:"rss_bytes_per_key_after_restart"`
}

// RunKeysRestart is the restart child: it starts the server on the filled
// store and times how long until JetStream answers and a publish of the
// first (oldest) id comes back as a duplicate.
func RunKeysRestart(ctx context.Context, dir, probe string, settle time.Duration, stdout io.Writer) error {
	t0 := time.Now()
	ns, err := StartEmbeddedServer(dir, 8<<20, 0, "")
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	var res KeysRestart
	res.ServerReady = time.Since(t0).Seconds()
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		return err
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, err = j.Stream(ctx, keysStream); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stream not available after restart: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.JetStreamReady = time.Since(t0).Seconds()
	body := Body("evt_x", "G-1-1", time.Now(), 1024)
	for {
		ack, err := j.PublishMsg(ctx, &nats.Msg{Subject: keysSubject, Header: keysHeaders(probe), Data: body}, js.WithMsgID(probe))
		if err == nil {
			if !ack.Duplicate {
				return fmt.Errorf("after restart the old id %s was stored again (seq %d): the dedup window was lost", probe, ack.Sequence)
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("publish after restart: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.DuplicateOK = time.Since(t0).Seconds()
	fmt.Fprintln(stdout, KeysReadyLine)
	if m, err := ReadMemory(os.Getpid()); err == nil {
		res.RSSAtReady = m.RSS
	}
	res.RSS, _ = settledMemory(settle)
	b, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s%s\n", KeysResultPrefix, b)
	return nil
}

// KeysResult is the memory-per-key and restart measurement.
type KeysResult struct {
	Fill     KeysFill      `json:"fill"`
	Restarts []KeysRestart `json:"restarts"`
}

// MeasureKeys runs the fill child, kills it (a crash), restarts, stops
// cleanly, restarts again. self is this program (run with the
// keys-fill/keys-restart subcommands); dir is removed at the end.
func MeasureKeys(ctx context.Context, self, dir string, o KeysFillOptions, logw io.Writer) (KeysResult, error) {
	var res KeysResult
	defer os.RemoveAll(dir)
	args := []string{"keys-fill", "-dir", dir, "-n", strconv.Itoa(o.N), "-body", strconv.Itoa(o.BodySize),
		"-settle", o.Settle.String(), "-applied=" + strconv.FormatBool(o.Applied)}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), ChildEnv+"=1")
	cmd.Stderr = logw
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	line, err := resultLine(stdout, nil)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return res, fmt.Errorf("keys-fill: %w", err)
	}
	if err := json.Unmarshal([]byte(line), &res.Fill); err != nil {
		return res, err
	}
	// A crash: nothing flushed beyond what the OS has, no index snapshot.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	_ = stdin.Close()
	for _, after := range []string{"crash", "clean stop"} {
		r, err := restartOnce(ctx, self, dir, o.Settle, logw)
		if err != nil {
			return res, fmt.Errorf("restart after %s: %w", after, err)
		}
		r.After = after
		if o.N > 0 {
			r.BytesPerKey = float64(r.RSS-res.Fill.RSSBase) / float64(o.N)
		}
		res.Restarts = append(res.Restarts, r)
	}
	return res, nil
}

func restartOnce(ctx context.Context, self, dir string, settle time.Duration, logw io.Writer) (KeysRestart, error) {
	var r KeysRestart
	cmd := exec.CommandContext(ctx, self, "keys-restart", "-dir", dir, "-probe", KeyID(0), "-settle", settle.String())
	cmd.Env = append(os.Environ(), ChildEnv+"=1")
	cmd.Stderr = logw
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	var ready time.Duration
	line, err := resultLine(stdout, func() { ready = time.Since(t0) })
	werr := cmd.Wait() // the child shuts its server down cleanly and exits
	if err != nil {
		return r, err
	}
	if werr != nil {
		return r, werr
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return r, err
	}
	r.ProcessReady = ready.Seconds()
	return r, nil
}

// resultLine reads a child's stdout up to its KeysResultPrefix line,
// calling onReady (when not nil) at the KeysReadyLine.
func resultLine(r io.Reader, onReady func()) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if sc.Text() == KeysReadyLine && onReady != nil {
			onReady()
			continue
		}
		if rest, ok := strings.CutPrefix(sc.Text(), KeysResultPrefix); ok {
			go func() { _, _ = io.Copy(io.Discard, r) }()
			return rest, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("exited without a result (see the log above)")
}
