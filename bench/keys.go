package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/jetstream"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// Memory per tracked key is measured in a process of its own (the
// "keys-fill" child), set up the way `hookgate serve` sets up the
// embedded server: the real streams (jetstream.Provision with a key
// index: WEBHOOKS's own duplicate window is dedup.window, 2 m) and the
// gateway's key index (jetstream.KeyIndex, which holds every key over the
// 96 h horizon). Baseline RSS, N publishes with Nats-Msg-Id, then the key
// index is opened on that store (no snapshot yet: it reads every key back
// from WEBHOOKS, as a first start after an upgrade does). The steady
// state of a horizon's worth of events is then waited for: the server's
// window holds only the last 2 m of ids, so the child waits until the
// fill's ids aged out of it and publishes the ids a steady rate leaves in
// it (N x 2 m / 96 h) through the index. RSS again once the file store's
// block caches have expired. Then GRANTS gets the ids a steady rate leaves
// in its window: hookgate's consumer publishes every applied event to
// GRANTS with Nats-Msg-Id = key, and GRANTS keeps a duplicate window of
// dedup.window where every provider publishes the sequenced way (the
// default config's do). Optionally an APPLIED-like KV bucket (one subject
// per key, TTL = horizon) is filled the same way: providers that remember
// applied keys there (ordering none, and the like) pay that too.

const (
	keysSubject       = "webhooks.bench.acct-1"
	keysGrantsSubject = "grants.bench.G-1-1.grant=2Eupdated"
	// keysWindow is dedup.window with serve's defaults: WEBHOOKS's and
	// GRANTS's duplicate windows (KeysFillOptions.Window, for a quick
	// smoke run); keysHorizon the horizon.
	keysWindow  = 2 * time.Minute
	keysHorizon = 96 * time.Hour
	keysBucket  = "APPLIEDBENCH"
	// keysIndexFile is the key index's snapshot in the data dir.
	keysIndexFile = "webhooks-keys.idx"
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
	// Window is dedup.window (0: 2 m, serve's default). The fill child
	// waits it out before the steady-state reading.
	Window time.Duration
}

// KeysFill is what the fill child measured.
type KeysFill struct {
	N           int     `json:"n"`
	IDBytes     int     `json:"id_bytes"`
	BodyBytes   int     `json:"body_bytes"`
	FillSeconds float64 `json:"fill_seconds"`
	FillRate    float64 `json:"fill_msgs_per_s"`
	// The key index's first open on the filled store: every key read back.
	IndexReadSeconds float64 `json:"index_read_seconds"`
	IndexReadRate    float64 `json:"index_read_keys_per_s"`
	// WindowN ids published after the fill's aged out of WEBHOOKS's window.
	WindowN     int     `json:"window_n"`
	RSSBase     int64   `json:"rss_base"`
	RSSAfter    int64   `json:"rss_after"`
	HeapBase    uint64  `json:"heap_base"`
	HeapAfter   uint64  `json:"heap_after"`
	BytesPerKey float64 `json:"rss_bytes_per_key"`
	HeapPerKey  float64 `json:"heap_bytes_per_key"`
	DiskBytes   int64   `json:"disk_bytes"`
	StreamMsgs  uint64  `json:"stream_msgs"`
	// GRANTS's window: the ids a steady rate leaves in it (N x 2 m /
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

// keysStreams are serve's streams with the embedded server's key index and
// the default config's windows.
func keysStreams(window time.Duration) jetstream.StreamsConfig {
	lim := jetstream.Limits{MaxAge: 720 * time.Hour}
	return jetstream.StreamsConfig{
		Replicas: 1, Horizon: keysHorizon, KeyIndex: true, DedupWindow: window, GrantsWindow: window,
		MaxMsgSize: 4 << 20, Webhooks: lim, Grants: lim, DLQ: lim, Audit: lim,
	}
}

func openKeysIndex(ctx context.Context, conn *jetstream.Conn, dir string, window time.Duration, logw io.Writer) (*jetstream.KeyIndex, error) {
	return jetstream.OpenKeyIndex(ctx, conn, jetstream.KeyIndexOptions{
		Path: filepath.Join(dir, keysIndexFile), Horizon: keysHorizon, Window: window,
		Log: slog.New(slog.NewTextHandler(logw, nil)),
	})
}

// runKeysIndex runs the index's Run as serve does (it keeps the index's
// lag clock moving) and returns its stop.
func runKeysIndex(ctx context.Context, ki *jetstream.KeyIndex) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = ki.Run(ctx) }()
	return func() { cancel(); <-done }
}

// RunKeysFill is the fill child: it fills, prints one KeysResultPrefix
// line of JSON, then waits for a line on stdin before shutting down
// cleanly, with the key index's snapshot (the parent kills it instead to
// measure a crash restart).
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
	conn := &jetstream.Conn{NC: nc, JS: j}
	if o.Window <= 0 {
		o.Window = keysWindow
	}
	if err := jetstream.Provision(ctx, j, keysStreams(o.Window)); err != nil {
		return err
	}
	if o.Applied {
		// APPLIED's settings (jetstream.ProvisionKV): history 1, TTL = horizon.
		if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: keysBucket, History: 1, TTL: keysHorizon, Storage: js.FileStorage}); err != nil {
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
	withID := func(i int) []js.PublishOpt { return []js.PublishOpt{js.WithMsgID(KeyID(i))} }
	start := time.Now()
	err = fill("WEBHOOKS ids", o.N, func(i int) *nats.Msg {
		return &nats.Msg{Subject: keysSubject, Header: keysHeaders(KeyID(i)), Data: body}
	}, withID)
	if err != nil {
		return err
	}
	filled := time.Now()
	res.FillSeconds = filled.Sub(start).Seconds()
	res.FillRate = float64(o.N) / res.FillSeconds

	// The first open: no snapshot, every key read back from WEBHOOKS.
	ki, err := openKeysIndex(ctx, conn, o.Dir, o.Window, stderr)
	if err != nil {
		return err
	}
	res.IndexReadSeconds = time.Since(filled).Seconds()
	res.IndexReadRate = float64(o.N) / res.IndexReadSeconds
	stopIndex := runKeysIndex(ctx, ki)

	// Steady state: the server's window holds the last 2 m of ids only.
	if wait := time.Until(filled.Add(o.Window + min(o.Window, 10*time.Second))); wait > 0 {
		fmt.Fprintf(stderr, "keys: waiting %s for the fill's ids to leave WEBHOOKS's %s window\n", wait.Round(time.Second), o.Window)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	res.WindowN = max(1, int(int64(o.N)*int64(o.Window)/int64(keysHorizon)))
	pub := ki.Publisher(jetstream.NewPublisher(conn, 5*time.Second))
	for i := range res.WindowN {
		key := KeyID(o.N + i)
		r, err := pub.Publish(ctx, jetstream.Message{Subject: keysSubject, Key: key, Header: keysHeaders(key), Body: body})
		if err != nil {
			return fmt.Errorf("window publish %d: %w", i, err)
		}
		if r.Duplicate {
			return fmt.Errorf("window publish %d (%s) answered duplicate", i, key)
		}
	}
	st, err := j.Stream(ctx, jetstream.StreamWebhooks)
	if err != nil {
		return err
	}
	res.StreamMsgs = st.CachedInfo().State.Msgs
	res.RSSAfter, res.HeapAfter = settledMemory(o.Settle)
	res.BytesPerKey = float64(res.RSSAfter-res.RSSBase) / float64(o.N)
	res.HeapPerKey = (float64(res.HeapAfter) - float64(res.HeapBase)) / float64(o.N)
	res.DiskBytes = dirSize(filepath.Join(o.Dir, "jetstream"))
	res.GrantsN = res.WindowN
	err = fill("GRANTS ids", res.GrantsN, func(i int) *nats.Msg {
		return &nats.Msg{Subject: keysGrantsSubject, Header: keysHeaders(KeyID(i)), Data: body}
	}, withID)
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
	// Wait for the parent: a line means stop cleanly; a kill is a crash
	// (the index's last snapshot is the one its open wrote: the window's
	// ids are read back at the restart, as a steady rate's last 2 m are
	// after a crash).
	_, _ = bufio.NewReader(stdin).ReadString('\n')
	stopIndex()
	if err := ki.Close(); err != nil {
		return err
	}
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
	IndexReady     float64 `json:"index_ready_s"`
	DuplicateOK    float64 `json:"old_id_duplicate_s"` // restart-to-ready
	ProcessReady   float64 `json:"process_spawn_to_ready_s"`
	RSSAtReady     int64   `json:"rss_at_ready"`
	// RSS is read once the block caches the recovery loaded have expired;
	// it holds every store of the fill: per event, its key in the index,
	// the windows' share and, when filled, the APPLIED-like entry.
	RSS         int64   `json:"rss_after_restart"`
	BytesPerKey float64 `json:"rss_bytes_per_key_after_restart"`
}

// RunKeysRestart is the restart child: it starts the server on the filled
// store, opens the key index as serve does, and times how long until a
// publish of the first (oldest) id through it comes back as a duplicate.
// It stops cleanly, with the index's snapshot.
func RunKeysRestart(ctx context.Context, dir, probe string, settle time.Duration, stdout, stderr io.Writer) error {
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
		if _, err = j.Stream(ctx, jetstream.StreamWebhooks); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stream not available after restart: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.JetStreamReady = time.Since(t0).Seconds()
	conn := &jetstream.Conn{NC: nc, JS: j}
	ki, err := openKeysIndex(ctx, conn, dir, keysWindow, stderr)
	if err != nil {
		return err
	}
	res.IndexReady = time.Since(t0).Seconds()
	stopIndex := runKeysIndex(ctx, ki)
	pub := ki.Publisher(jetstream.NewPublisher(conn, 5*time.Second))
	body := Body("evt_x", "G-1-1", time.Now(), 1024)
	r, err := pub.Publish(ctx, jetstream.Message{Subject: keysSubject, Key: probe, Header: keysHeaders(probe), Body: body})
	if err != nil {
		return fmt.Errorf("publish after restart: %w", err)
	}
	if !r.Duplicate {
		return fmt.Errorf("after restart the old id %s was stored again (seq %d): the key index lost it", probe, r.Seq)
	}
	res.DuplicateOK = time.Since(t0).Seconds()
	fmt.Fprintln(stdout, KeysReadyLine)
	if m, err := ReadMemory(os.Getpid()); err == nil {
		res.RSSAtReady = m.RSS
	}
	res.RSS, _ = settledMemory(settle)
	b, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s%s\n", KeysResultPrefix, b)
	stopIndex()
	return ki.Close()
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
		"-settle", o.Settle.String(), "-applied=" + strconv.FormatBool(o.Applied), "-window", o.Window.String()}
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
	// A crash: nothing flushed beyond what the OS has; the key index's
	// last snapshot is the one its first open wrote.
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
