package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
)

const (
	backupUsage  = "want 'hookgate backup --config FILE --out DIR'"
	restoreUsage = "want 'hookgate restore --config FILE --from DIR'"
	// backupFormat names manifest.json's layout; restore refuses others.
	backupFormat = "hookgate-backup/1"
	manifestFile = "manifest.json"
)

// backupManifest is DIR/manifest.json, written last: a directory without
// it is no backup.
type backupManifest struct {
	Format   string    `json:"format"`
	Hookgate string    `json:"hookgate"`
	Server   string    `json:"nats_server"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Paused are the serves whose consumer the backup paused (none: no
	// serve with the consumer role ran).
	Paused  []string       `json:"paused"`
	Streams []backupStream `json:"streams"` // in the order taken, and restored
}

type backupStream struct {
	Name   string          `json:"name"`
	File   string          `json:"file"`
	Bytes  int64           `json:"bytes"`
	SHA256 string          `json:"sha256"`
	Config json.RawMessage `json:"config"` // as the server reported it
	State  json.RawMessage `json:"state"`
}

// streamCounts reads what an operator checks in a stream's state.
func (b backupStream) counts() (msgs, consumers uint64) {
	var s struct {
		Msgs      uint64 `json:"messages"`
		Consumers uint64 `json:"consumer_count"`
	}
	_ = json.Unmarshal(b.State, &s)
	return s.Msgs, s.Consumers
}

// runBackup is `hookgate backup`: a snapshot of every hookgate stream of
// the running system (or of a data_dir nothing runs on), taken one after
// another in jetstream.BackupStreams' order with every consumer paused,
// so that it restores to a state the consumer goes on from, which a copy
// of a running data_dir does not (see the README's "Backup and restore").
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	out := fs.String("out", "", "directory to write the backup to (new, or empty)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("backup: unexpected %q; %s", fs.Arg(0), backupUsage)
	}
	if *out == "" {
		return usagef("backup: --out is required; %s", backupUsage)
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	created, err := backupDir(*out)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys, err := openForCLI(ctx, cfg, logger, readOnly)
	if err != nil {
		removeBackup(*out, nil, created)
		return err
	}
	defer sys.Close()
	m := backupManifest{Format: backupFormat, Hookgate: buildVersion(), Server: sys.conn.NC.ConnectedServerVersion(), Started: time.Now().UTC()}
	paused, resume, err := pauseConsumers(ctx, sys, stdout)
	if err != nil {
		removeBackup(*out, nil, created)
		return err
	}
	defer resume()
	m.Paused = paused
	var written []string
	for _, name := range jetstream.BackupStreams {
		b, err := backupOne(ctx, sys.conn, *out, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && name != jetstream.StreamWebhooks {
			// A bucket no consumer made yet: nothing of it to keep.
			fmt.Fprintf(stdout, "%s\tnot on the server: skipped\n", name)
			continue
		}
		if err != nil {
			removeBackup(*out, append(written, name+".snap.part"), created)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("backup: no WEBHOOKS stream here: nothing to back up (has serve run with this config's nats settings?)")
			}
			if ctx.Err() != nil {
				return fmt.Errorf("backup: interrupted while reading %s (nothing kept in %s; the consumers are resumed)", name, *out)
			}
			return fmt.Errorf("backup: %s: %w (nothing kept in %s)", name, err, *out)
		}
		written = append(written, b.File)
		m.Streams = append(m.Streams, b)
		msgs, consumers := b.counts()
		fmt.Fprintf(stdout, "%s\t%d messages\t%d consumers\t%s\t%s\n", name, msgs, consumers, humanBytes(uint64(b.Bytes)), b.File)
	}
	resume()
	m.Finished = time.Now().UTC()
	if err := writeManifest(*out, m); err != nil {
		removeBackup(*out, append(written, manifestFile+".part"), created)
		return fmt.Errorf("backup: %w (nothing kept in %s)", err, *out)
	}
	var total int64
	for _, b := range m.Streams {
		total += b.Bytes
	}
	fmt.Fprintf(stdout, "backup of %d streams in %s (%s, %s); restore it with 'hookgate restore --config FILE --from %s' onto a new data_dir\n",
		len(m.Streams), *out, humanBytes(uint64(total)), m.Finished.Sub(m.Started).Round(time.Millisecond), *out)
	return nil
}

// backupDir makes dir, or accepts it empty; created tells whether this
// call made it (so a failed backup removes it again).
func backupDir(dir string) (created bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return false, fmt.Errorf("backup: --out: %w", err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("backup: --out: %w", err)
	case len(entries) > 0:
		partial := func(e os.DirEntry) bool {
			// Whole snapshots, or the one being written (.part, renamed
			// when whole): a backup killed in its first stream leaves only
			// that (found by review).
			return strings.HasSuffix(e.Name(), ".snap") || strings.HasSuffix(e.Name(), ".part")
		}
		if _, err := os.Stat(filepath.Join(dir, manifestFile)); errors.Is(err, os.ErrNotExist) && slices.ContainsFunc(entries, partial) {
			// Snapshots without a manifest: a backup killed part way,
			// which restore refuses; not "another" backup.
			return false, fmt.Errorf("backup: --out %s holds a backup that did not finish (snapshot files, no %s: it was stopped part way, and restore refuses it): remove it, or give a new directory", dir, manifestFile)
		}
		return false, fmt.Errorf("backup: --out %s is not empty: give a new directory (a backup never overwrites another)", dir)
	}
	// It will hold every stored body: as private as one made here.
	if err := os.Chmod(dir, 0o700); err != nil {
		return false, fmt.Errorf("backup: --out: %w", err)
	}
	return false, nil
}

// backupOne snapshots one stream into dir/<name>.snap, written whole or
// not at all.
func backupOne(ctx context.Context, c *jetstream.Conn, dir, name string) (backupStream, error) {
	b := backupStream{Name: name, File: name + ".snap"}
	part := filepath.Join(dir, b.File+".part")
	f, err := os.OpenFile(part, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return b, err
	}
	h := sha256.New()
	info, err := jetstream.Snapshot(ctx, c, name, io.MultiWriter(f, h))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(part, filepath.Join(dir, b.File))
	}
	if err != nil {
		_ = os.Remove(part)
		return b, err
	}
	b.Bytes, b.SHA256, b.Config, b.State = info.Bytes, hex.EncodeToString(h.Sum(nil)), info.Config, info.State
	return b, nil
}

func writeManifest(dir string, m backupManifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeDurable(dir, manifestFile, append(data, '\n'))
}

// writeDurable writes dir/name whole or not at all (name.part, renamed)
// and makes it durable, its directory entry too.
func writeDurable(dir, name string, data []byte) error {
	part := filepath.Join(dir, name+".part")
	f, err := os.OpenFile(part, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(part, filepath.Join(dir, name))
	}
	if err == nil {
		// The renames are durable once the directory is.
		if d, derr := os.Open(dir); derr == nil {
			err = d.Sync()
			_ = d.Close()
		}
	}
	return err
}

// removeBackup removes what a failed backup wrote, and dir when it made it.
func removeBackup(dir string, files []string, created bool) {
	for _, f := range files {
		_ = os.Remove(filepath.Join(dir, f))
	}
	if created {
		_ = os.Remove(dir)
	}
}

// runRestore is `hookgate restore`: the streams of a backup, recreated on
// a new data_dir (or a cluster without hookgate's streams), in the order
// they were taken.
func runRestore(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	from := fs.String("from", "", "directory hookgate backup wrote")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("restore: unexpected %q; %s", fs.Arg(0), restoreUsage)
	}
	if *from == "" {
		return usagef("restore: --from is required; %s", restoreUsage)
	}
	cfg, err := loadConfig(*cfgPath, getenv)
	if err != nil {
		return err
	}
	m, err := readBackup(*from)
	if err != nil {
		return err
	}
	if dir := cfg.NATS.Embedded.DataDir; cfg.NATS.URL == "" {
		if err := newDataDir(dir); err != nil {
			return err
		}
		// A failed restore leaves data_dir as it found it, empty (run
		// after the server is closed: defers run last first).
		defer func() {
			if err != nil {
				if rerr := emptyDir(dir); rerr != nil {
					err = fmt.Errorf("%w; empty data_dir %s before running restore again (%v)", err, dir, rerr)
				} else {
					err = fmt.Errorf("%w; data_dir %s is empty again, so restore can run again", err, dir)
				}
			}
		}()
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.NATS.URL == "" {
		// The new data_dir, in this process: nats.embedded.listen may be
		// the address of a serve still running on the old one (a copy of
		// its config with data_dir changed), which is not the target
		// (review BC).
		own := *cfg
		own.NATS.Embedded.Listen = ""
		cfg = &own
	}
	sys, err := openForCLI(ctx, cfg, logger, readOnly)
	if err != nil {
		return err
	}
	defer sys.Close()
	var there []string
	for _, b := range m.Streams {
		if _, err := sys.conn.JS.Stream(ctx, b.Name); err == nil {
			there = append(there, b.Name)
		}
	}
	if len(there) > 0 {
		return fmt.Errorf("restore: %s already on the target (a running serve, or a store in use): restore onto a new data_dir, or a cluster without hookgate's streams", strings.Join(there, ", "))
	}
	// Marked unfinished until the last stream is in: a restore killed part
	// way leaves a data_dir (the file) or a cluster (each restored
	// stream's metadata) that serve and the CLI refuse, not one they run
	// on (a failed one is emptied or its streams deleted, the marks with
	// them). The file covers the embedded server's streams before the
	// first is made.
	began := fmt.Sprintf("hookgate restore from %s began at %s and has not finished", *from, time.Now().UTC().Format(time.RFC3339))
	o := jetstream.RestoreOptions{Replicas: 1, Unfinished: began}
	if cfg.NATS.URL != "" {
		o.Replicas, o.ClusterHorizon = cfg.NATS.Replicas, cfg.Dedup.Horizon
	}
	mark := ""
	if cfg.NATS.URL == "" {
		mark = filepath.Join(cfg.NATS.Embedded.DataDir, jetstream.RestoreMarkFile)
		if err := writeDurable(cfg.NATS.Embedded.DataDir, jetstream.RestoreMarkFile, []byte(began+"\n")); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	// Cleaning up after an interrupt takes seconds: said at once, or a
	// second Ctrl-C cuts it short (an operator tools audit, stop 40).
	stopNote := context.AfterFunc(ctx, func() {
		fmt.Fprintln(stderr, "hookgate: restore: interrupted: removing what was restored, so it can run again")
	})
	defer stopNote()
	var done []string
	for _, b := range m.Streams {
		if err := restoreOne(ctx, sys.conn, *from, b, o); err != nil {
			undone := ""
			if cfg.NATS.URL != "" {
				undone = undoRestore(sys.conn, done)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("restore: interrupted while restoring %s%s", b.Name, undone)
			}
			return fmt.Errorf("restore: %s: %w%s", b.Name, err, undone)
		}
		done = append(done, b.Name)
		msgs, consumers := b.counts()
		fmt.Fprintf(stdout, "restored %s\t%d messages\t%d consumers\n", b.Name, msgs, consumers)
	}
	stopNote() // every stream is in: an interrupt now removes nothing
	// Seconds at most; an interrupt now would leave every stream marked.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := jetstream.FinishRestore(fctx, sys.conn, done); err != nil {
		return fmt.Errorf("restore: every stream is in, but taking the unfinished mark off them failed, so hookgate refuses them: %w", err)
	}
	if mark != "" {
		if err := os.Remove(mark); err != nil {
			return fmt.Errorf("restore: its mark %s could not be removed after the last stream: %w", mark, err)
		}
	}
	audit, stopAudit := startAudit(sys, logger, 16, nil)
	audit.Record(event.AuditRecord{Time: time.Now().UTC(), Decision: event.DecisionRestored, Actor: event.ActorOperator,
		Reason: fmt.Sprintf("restored from the backup %s took at %s (streams %s)", m.Hookgate, m.Started.Format(time.RFC3339), strings.Join(done, ", "))})
	stopAudit()
	if audit.Failed() > 0 {
		fmt.Fprintln(stderr, "hookgate: restore: the restore's AUDIT record was not written (the streams are restored)")
	}
	newToken := ""
	if cfg.NATS.URL == "" && cfg.NATS.Embedded.Token == "" {
		// The backup holds no token: said here, not only in the README
		// (an operator tools audit, stop 40).
		newToken = fmt.Sprintf("; data_dir has a new %s (the backup holds no token): give it to downstream services and other machines' CLI configs, or put the old one in its place before serve starts", jetstream.TokenFile)
	}
	// What keeps repeats of restored events out differs: the embedded
	// key index, or, on a NATS server of one's own, its duplicate window,
	// which nats-server fills only at its next start (audit 42: the line
	// promised a key index nats.url does not have).
	repeats := "the key index is read back from WEBHOOKS before serve takes webhooks"
	if cfg.NATS.URL != "" {
		repeats = "the NATS servers fill WEBHOOKS's duplicate window with the restored events' keys only when they next start: restart them before serve takes webhooks, or a repeat of a restored event is stored again"
	}
	fmt.Fprintf(stdout, "restored %d streams from %s (backup taken at %s); start serve with this config: events stored after the backup read WEBHOOKS are not in it, and %s%s\n",
		len(done), *from, m.Started.Format(time.RFC3339), repeats, newToken)
	return nil
}

// readBackup reads dir's manifest and checks every file it names against
// its size and digest, before anything is restored.
func readBackup(dir string) (backupManifest, error) {
	var m backupManifest
	if _, err := os.Stat(dir); err != nil {
		return m, fmt.Errorf("restore: --from: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("restore: %s has no %s: not a backup, or one that did not finish", dir, manifestFile)
	}
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("restore: %s: %w", filepath.Join(dir, manifestFile), err)
	}
	if m.Format != backupFormat {
		return m, fmt.Errorf("restore: %s: format %q, this hookgate reads %q", filepath.Join(dir, manifestFile), m.Format, backupFormat)
	}
	if !slices.ContainsFunc(m.Streams, func(b backupStream) bool { return b.Name == jetstream.StreamWebhooks }) {
		return m, fmt.Errorf("restore: %s: no WEBHOOKS stream in it", filepath.Join(dir, manifestFile))
	}
	for _, b := range m.Streams {
		if b.File != filepath.Base(b.File) || !strings.HasSuffix(b.File, ".snap") {
			return m, fmt.Errorf("restore: %s: stream %s's file %q is not a snapshot file name", filepath.Join(dir, manifestFile), b.Name, b.File)
		}
		f, err := os.Open(filepath.Join(dir, b.File))
		if err != nil {
			return m, fmt.Errorf("restore: %w: the backup is incomplete; nothing restored", err)
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return m, fmt.Errorf("restore: %w", err)
		}
		if n != b.Bytes {
			return m, fmt.Errorf("restore: %s does not match the manifest (%d bytes, want %d): the backup is damaged; nothing restored", filepath.Join(dir, b.File), n, b.Bytes)
		}
		if hex.EncodeToString(h.Sum(nil)) != b.SHA256 {
			return m, fmt.Errorf("restore: %s does not match the manifest (its SHA-256 differs): the backup is damaged; nothing restored", filepath.Join(dir, b.File))
		}
	}
	return m, nil
}

// newDataDir makes sure data_dir is new: absent (made now) or empty. A
// data_dir with a store in it keeps files a restored one must not meet
// (the key index's webhooks-keys.idx, another store's streams).
func newDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o700)
	case err != nil:
		return fmt.Errorf("restore: nats.embedded.data_dir: %w", err)
	case len(entries) > 0 && !leftByACommand(dir, entries):
		// The holder first: a restore still running has its mark there
		// too, and "empty it" would delete the store from under it
		// (found by review).
		if held := jetstream.LockHolder(dir); held != "" {
			// A running serve's: "move this one away" was the advice.
			return fmt.Errorf("restore: nats.embedded.data_dir %s is in use by process %s (a running serve, or a restore under way?): restore onto a new data_dir, with a copy of the config pointing at it", dir, held)
		}
		if _, err := os.Stat(filepath.Join(dir, jetstream.RestoreMarkFile)); err == nil {
			return fmt.Errorf("restore: nats.embedded.data_dir %s holds a restore that did not finish (stopped part way): empty it, then run restore again", dir)
		}
		return fmt.Errorf("restore: nats.embedded.data_dir %s is not empty: restore onto a new data_dir (point the config at a new directory, or move this one away)", dir)
	}
	return nil
}

// leftByACommand reports whether entries, data_dir's, are only what an
// operator command run on a new data_dir leaves (`status` to check the
// config reaches it): the lock file, a generated token, and a store with
// no stream. restore refused such a data_dir as not empty (audit 42).
func leftByACommand(dir string, entries []os.DirEntry) bool {
	for _, e := range entries {
		switch e.Name() {
		case jetstream.LockFile, jetstream.TokenFile:
		case "jetstream":
			if !e.IsDir() || storeHoldsStreams(filepath.Join(dir, "jetstream")) {
				return false
			}
		default:
			return false
		}
	}
	return jetstream.LockHolder(dir) == ""
}

// storeHoldsStreams reports whether an embedded store directory holds a
// stream (nats-server keeps each under <store>/jetstream/<account>/streams),
// or cannot be read.
func storeHoldsStreams(store string) bool {
	accounts, err := os.ReadDir(filepath.Join(store, "jetstream"))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	for _, a := range accounts {
		streams, err := os.ReadDir(filepath.Join(store, "jetstream", a.Name(), "streams"))
		if err == nil && len(streams) > 0 || err != nil && !errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}

// emptyDir removes everything in dir, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func restoreOne(ctx context.Context, c *jetstream.Conn, dir string, b backupStream, o jetstream.RestoreOptions) error {
	f, err := os.Open(filepath.Join(dir, b.File))
	if err != nil {
		return err
	}
	defer f.Close()
	return jetstream.Restore(ctx, c, b.Config, b.State, o, f)
}

// undoRestore deletes the streams a failed restore made, so that running
// it again finds the target as it was; it says what it did.
func undoRestore(c *jetstream.Conn, names []string) string {
	if len(names) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var left []string
	for _, n := range names {
		if err := c.JS.DeleteStream(ctx, n); err != nil {
			left = append(left, n)
		}
	}
	if len(left) > 0 {
		return fmt.Sprintf("; %s restored before it could not be removed: delete them (or the data_dir) before running restore again", strings.Join(left, ", "))
	}
	return fmt.Sprintf("; removed %s restored before it, so restore can run again", strings.Join(names, ", "))
}

// pauseConsumers pauses the consumer of every running serve with the
// consumer role (jetstream.SubjectPause) and keeps them paused until
// resume is called (which may be called more than once); the pause runs
// out by itself a while after a backup that died. With no serve running
// there is nothing to pause. A serve that does not pause (an older
// hookgate, or events under way that do not finish) fails the backup:
// read while it applies, the streams would not restore to a state the
// consumer can go on from.
func pauseConsumers(ctx context.Context, sys *system, stdout io.Writer) (paused []string, resume func(), err error) {
	noop := func() {}
	req := jetstream.PauseRequest{ID: fmt.Sprintf("backup-%s-%d", instanceName(), time.Now().UnixNano()), For: pauseLease}
	// Announced before anything else, until the resume: a serve that
	// starts meanwhile takes the pause before it applies, and an operator's
	// replay refuses to start. One that runs already refuses the backup.
	stopAnnounce, err := jetstream.Announce(sys.conn, jetstream.SubjectBackupRunning, req)
	if err != nil {
		return nil, noop, fmt.Errorf("backup: %w (on a cluster with authorization the backup's user subscribes to %s)", err, jetstream.SubjectBackupRunning)
	}
	var mu sync.Mutex // want grows when a check finds another serve
	var want []string
	send := func(ctx context.Context, r jetstream.PauseRequest, wait time.Duration) map[string]jetstream.PauseAnswer {
		mu.Lock()
		w := slices.Clone(want)
		mu.Unlock()
		got, _ := jetstream.AskPause(ctx, sys.conn, r, w, wait)
		return got
	}
	// The end of the pause goes out also after an interrupt, and when the
	// backup is refused before it paused anyone: a serve that started
	// meanwhile took the pause from the announcement, and waits for it
	// (review BE). Announced no more before the resume, so such a serve
	// hears the resume too.
	always := context.WithoutCancel(ctx)
	endPause := func() {
		stopAnnounce()
		send(always, jetstream.PauseRequest{ID: req.ID, Resume: true}, 2*time.Second)
	}
	if err := operatorsApplying(ctx, sys); err != nil {
		endPause()
		return nil, noop, err
	}
	found, err := consumerServes(ctx, sys)
	if err != nil {
		endPause()
		return nil, noop, err
	}
	mu.Lock()
	want = found
	mu.Unlock()
	// The renewals go out until the resume, with no serve found too.
	var once sync.Once
	renewDone := make(chan struct{})
	stopRenew := make(chan struct{})
	resume = func() {
		once.Do(func() {
			close(stopRenew)
			<-renewDone
			endPause()
		})
	}
	go func() {
		defer close(renewDone)
		t := time.NewTicker(pauseRenew)
		defer t.Stop()
		for {
			select {
			case <-stopRenew:
				return
			case <-t.C:
				send(always, req, 5*time.Second)
			}
		}
	}()
	interrupted := func() error {
		return fmt.Errorf("backup: interrupted while waiting for the consumers to pause: %w (nothing written; the serves that paused are resumed)", ctx.Err())
	}
	if len(want) == 0 {
		return nil, resume, nil
	}
	// Pause, then look again for serves with the consumer role: one that
	// answered hookgate.instances late or started meanwhile got the same
	// request (every serve subscribes) and is waited for too, until a
	// look finds none unanswered.
	answered := map[string]jetstream.PauseAnswer{}
	for round := 0; ; round++ {
		for w, a := range send(ctx, req, pauseAnswerWait) {
			answered[w] = a
		}
		if ctx.Err() != nil {
			resume()
			return nil, noop, interrupted()
		}
		var failed []string
		mu.Lock()
		for _, w := range want {
			switch a, ok := answered[w]; {
			case !ok:
				failed = append(failed, w+": no answer (a hookgate from before backup, one too busy to answer, or NATS permissions that deny it hookgate.consumer.pause)")
			case !a.Paused:
				failed = append(failed, w+": "+a.Err)
			}
		}
		mu.Unlock()
		if len(failed) > 0 {
			resume()
			// One sentence per serve, then what to do (a run-on sentence
			// read "the consumer of X: the events ... within 2m0s did not
			// pause", an operator tools audit, stop 40).
			return nil, noop, fmt.Errorf("backup: a consumer did not pause, so the streams cannot be read at one moment; nothing written (%s). Try again once its events under way finish (a slow forward receiver), upgrade or stop a serve that does not answer, or back up a file-system snapshot of data_dir", strings.Join(failed, "; "))
		}
		again, err := consumerServes(ctx, sys)
		if err != nil {
			resume()
			if ctx.Err() != nil {
				return nil, noop, interrupted()
			}
			return nil, noop, err
		}
		mu.Lock()
		grew := false
		for _, w := range again {
			if !slices.Contains(want, w) {
				want, grew = append(want, w), true
			}
		}
		mu.Unlock()
		if !grew {
			break
		}
		if round == 3 {
			// Each new one is waited for in the next round: serves
			// still starting after four (a rolling deploy) are not.
			resume()
			return nil, noop, errors.New("backup: serves with the consumer role kept starting while the backup paused them (a deploy under way?); nothing written: try again once they are up")
		}
	}
	fmt.Fprintf(stdout, "paused the consumer of %s while the streams are read (webhooks are still taken)\n", strings.Join(want, ", "))
	return want, resume, nil
}

// consumerServes are the running serves with the consumer role, from
// their answers on hookgate.instances: none when nothing subscribes there
// (no serve runs, or only this command's own embedded server). Serves
// that subscribe but do not answer fail it: one of them may be applying.
func consumerServes(ctx context.Context, sys *system) ([]string, error) {
	answers, err := jetstream.AskInstances(ctx, sys.conn, jetstream.AskOptions{Wait: 5 * time.Second, Quiet: time.Second})
	switch {
	case errors.Is(err, jetstream.ErrNoSubscriber):
		return nil, nil
	case errors.Is(err, jetstream.ErrNoAnswer):
		return nil, fmt.Errorf("backup: %v: a serve is connected but none answered, so whether one applies events is unknown; nothing written. Try again, or see hookgate status", err)
	case err != nil:
		return nil, fmt.Errorf("backup: %w", err)
	}
	var want []string
	for _, a := range answers {
		var d instanceDoc
		if json.Unmarshal(a, &d) == nil && slices.Contains(d.Roles, "consumer") && !slices.Contains(want, d.Instance) {
			want = append(want, d.Instance)
		}
	}
	return want, nil
}

// operatorsApplying fails the backup when an operator command that applies
// events runs (jetstream.SubjectOperatorApplying): the streams read one
// after another would hold part of its work.
func operatorsApplying(ctx context.Context, sys *system) error {
	runs, err := jetstream.Running[jetstream.OperatorRun](ctx, sys.conn, jetstream.SubjectOperatorApplying)
	if errors.Is(err, jetstream.ErrPermissionDenied) {
		return fmt.Errorf("backup: asking whether an operator's replay applies events: %w; nothing written: let the backup's NATS user publish to %s (README, Backup and restore)", err, jetstream.SubjectOperatorApplying)
	}
	if err != nil {
		return fmt.Errorf("backup: asking whether an operator's replay applies events: %w; nothing written. Try again", err)
	}
	if len(runs) > 0 {
		var named []string
		for _, r := range runs {
			named = append(named, fmt.Sprintf("'hookgate %s' on %s (since %s)", r.Command, r.Instance, r.Started.Format(time.RFC3339)))
		}
		return fmt.Errorf("backup: %s applies events; nothing written: back up after it ends", strings.Join(named, ", "))
	}
	return nil
}

// pauseLease is how long one pause request holds a consumer. The backup
// asks again every pauseRenew: that also pauses a serve that started
// since (one that took the consumer lock meanwhile applies until then).
const (
	pauseLease = time.Minute
	pauseRenew = 5 * time.Second
)

// pauseAnswerWait bounds the wait for the pause's answers: a serve
// answers once its events under way are done (pauseQuiesceWait at most).
var pauseAnswerWait = pauseQuiesceWait + 10*time.Second
