package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures the in-process nats-server.
type EmbeddedOptions struct {
	DataDir string // JetStream file storage lives in DataDir/jetstream
	// Listen, when not empty ("127.0.0.1:4222"), also accepts TCP clients
	// (the CLI, downstream services); they must present Token.
	Listen string
	// Token authenticates clients. Empty: read DataDir/nats.token, or
	// generate it there once (mode 0600).
	Token string
	// SyncAlways fsyncs every write; otherwise the server's 2 min interval.
	SyncAlways bool
	// MaxPayload is the server's max message size (body plus headers).
	MaxPayload int32
	// Limits is the sum of the streams' configured max_bytes. The server's
	// store ceiling is set to that plus the size of DataDir's file system,
	// instead of nats-server's default of 75% of the space free at start: against that default every stream's max_bytes
	// is set aside at each start, so limits above the free space (the
	// default config on a small disk, a restart after a full disk with only
	// some space freed) refused to start with "insufficient storage". The
	// limits are ceilings; a full disk is reported where it happens. 0:
	// the server's default.
	Limits int64
	// Log receives the server's errors and warnings (nil: dropped), a
	// given message at most once a minute.
	Log *slog.Logger
	// Lock, when set, is DataDir's lock already taken with LockDataDir
	// (serve takes it before it listens, so a second serve on the same
	// data_dir still names the holder rather than a busy port).
	// StartEmbedded owns it from then on: Shutdown releases it, and so does
	// a failed start.
	Lock *os.File
}

// Embedded is a running in-process nats-server that owns DataDir.
type Embedded struct {
	srv      *server.Server
	token    string
	lock     *os.File
	url      string
	writeErr atomic.Pointer[string]
	// serverLog is the server's logger: kept to be read by tests.
	serverLog *serverLog
}

// ErrStoreWrite is the embedded server's file store refusing writes after
// a write failed (a full disk, an I/O error): nats-server keeps such an
// error until the store is opened again, so nothing is stored until then
// (serve starts again in place once data_dir has room, which opens it).
var ErrStoreWrite = errors.New("the event store stopped writing after a write error")

// WriteError returns ErrStoreWrite (wrapped, with the server's message)
// once the server reported a write error in its file store, else nil.
func (e *Embedded) WriteError() error {
	if e == nil {
		return nil
	}
	if m := e.writeErr.Load(); m != nil {
		return fmt.Errorf("%w (nats-server: %s): free space under data_dir (or mend the disk): serve starts again by itself once there is room", ErrStoreWrite, *m)
	}
	return nil
}

// serverLog passes the embedded server's errors and warnings to a slog
// logger (its notices, debug and trace lines are dropped) and notices a
// critical write error in its file store. nats-server logs a file
// store's write error once, when it starts refusing writes ("Critical
// write error: ..."); without this the store stopped writing in silence
// and /readyz stayed 200 (review L).
type serverLog struct {
	log  *slog.Logger
	e    *Embedded
	mu   sync.Mutex
	last map[string]time.Time // serverLogKey -> when last logged
	// rebuilt are the streams whose saved state the server found out of
	// date at start (an unclean stop) and rebuilt from their files.
	rebuilt []string
}

// Lines a file store writes at start after an unclean stop, for each
// stream written since its state was last saved: expected then, and not
// a fault (nothing acknowledged is lost), but eight warnings that say
// "errored" read as one at 3 a.m. They are folded into one hookgate line.
const (
	rebuildOutdated = "Stream state outdated, last block has additional entries, will rebuild"
	rebuildExtra    = "Stream state outdated, found extra blocks, will rebuild"
	rebuildErrored  = "Recovering stream state from index errored: %v"
	rebuildPrior    = "prior state file"
)

// uncleanStopMsg is the line said once, at the first stream rebuilt.
const uncleanStopMsg = "event store was not stopped cleanly (a crash, kill -9, an out-of-memory kill or a power loss): nats-server rebuilds each stream's saved state by reading its files (about a second per GB stored) before serve takes webhooks; after a process kill every acknowledged event is kept, after a power loss only with nats.embedded.sync: always"

// rebuildLine reports a file store's rebuild line and its stream.
func rebuildLine(format string, v []any) (stream string, ok bool) {
	rest, found := strings.CutPrefix(format, "Filestore [")
	if !found {
		return "", false
	}
	i := strings.Index(rest, "] ")
	if i < 0 {
		return "", false
	}
	stream, line := rest[:i], rest[i+2:]
	switch {
	case line == rebuildOutdated || line == rebuildExtra:
		return stream, true
	case line == rebuildErrored && len(v) == 1 && fmt.Sprint(v[0]) == rebuildPrior:
		return stream, true
	}
	return "", false
}

// Rebuilt returns the streams rebuilt at start after an unclean stop.
func (l *serverLog) Rebuilt() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rebuilt)
}

func (l *serverLog) Noticef(string, ...any) {}
func (l *serverLog) Debugf(string, ...any)  {}
func (l *serverLog) Tracef(string, ...any)  {}
func (l *serverLog) Warnf(format string, v ...any) {
	if stream, ok := rebuildLine(format, v); ok {
		l.mu.Lock()
		first := len(l.rebuilt) == 0
		if !slices.Contains(l.rebuilt, stream) {
			l.rebuilt = append(l.rebuilt, stream)
		}
		l.mu.Unlock()
		if l.log != nil {
			if first {
				l.log.Warn(uncleanStopMsg)
			}
			l.log.Debug("nats-server: "+fmt.Sprintf(format, v...), slog.String("stream", stream))
		}
		return
	}
	l.emit(slog.LevelWarn, format, v)
}
func (l *serverLog) Errorf(format string, v ...any) {
	// The file store's own line: its format is built from the stream's
	// name and a constant, never from what a client sent (a client's bytes
	// quoted in a parser error must not pass for it; review D2).
	if strings.HasPrefix(format, "Filestore [") && strings.HasSuffix(format, "] Critical write error: %v") {
		msg := fmt.Sprintf(format, v...)
		if l.e.writeErr.CompareAndSwap(nil, &msg) && l.log != nil {
			l.log.Error("event store stopped writing: webhooks and /readyz answer 503 until it is opened again; free space under data_dir (or mend the disk): serve starts again by itself once there is room", slog.String("nats_server", msg))
		}
	}
	l.emit(slog.LevelError, format, v)
}
func (l *serverLog) Fatalf(format string, v ...any) {
	l.emit(slog.LevelError, format, v)
}

// serverLogKeys bounds serverLog's memory of what it logged: past it, the
// memory starts over (a minute's limit lost, not memory grown).
const serverLogKeys = 256

func (l *serverLog) emit(level slog.Level, format string, v []any) {
	if l.log == nil {
		return
	}
	key := serverLogKey(format)
	l.mu.Lock()
	now := time.Now()
	if t, ok := l.last[key]; ok && now.Sub(t) < time.Minute {
		l.mu.Unlock()
		return
	}
	if len(l.last) >= serverLogKeys {
		clear(l.last)
	}
	l.last[key] = now
	l.mu.Unlock()
	l.log.LogAttrs(context.Background(), level, "nats-server: "+fmt.Sprintf(format, v...))
}

// serverLogKey is what makes two server lines "the same message" for the
// once-a-minute limit: nats-server writes a client's address and id into
// the format ("127.0.0.1:5000 - cid:7 - ...") and, in a parser error, the
// client's own bytes, so the format alone would make every connection a
// new message. Without its client prefix, up to its first quote, at most
// 64 bytes.
func serverLogKey(format string) string {
	if i := strings.Index(format, " - "); i >= 0 {
		if j := strings.Index(format[i+3:], " - "); j >= 0 && strings.Contains(format[i+3:i+3+j], "id:") {
			format = format[i+3+j+3:]
		}
	}
	if i := strings.IndexAny(format, "'\""); i >= 0 {
		format = format[:i]
	}
	if len(format) > 64 {
		format = format[:64]
	}
	return format
}

// TokenFile is where a generated token is kept, relative to data_dir.
const TokenFile = "nats.token"

// LockFile, in data_dir, guards it against a second process.
const LockFile = "hookgate.lock"

// RestoreMarkFile, in data_dir, says a restore into it began and has not
// finished: hookgate restore writes it before the first stream and
// removes it after the last. A restore killed part way (kill -9, or a
// second Ctrl-C while it cleaned up) left some streams restored, WEBHOOKS
// partly, and serve ran on them with every check green while the
// backup's unapplied events were gone (an operator tools audit, stop 40).
// StartEmbedded refuses such a data_dir.
const RestoreMarkFile = "restore-unfinished"

// unfinishedRestoreMark returns ErrUnfinishedRestore, saying what to do,
// when dir holds RestoreMarkFile.
func unfinishedRestoreMark(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, RestoreMarkFile)); err != nil {
		return nil
	}
	return fmt.Errorf("data_dir %s holds %w (hookgate restore was stopped part way; its streams are incomplete, and events of the backup would be missing without a word): empty it and run hookgate restore again",
		dir, ErrUnfinishedRestore)
}

// StartEmbedded locks DataDir (unless given its lock), starts the server
// and waits until it accepts connections. It returns ErrDataDirLocked
// (naming the holder's pid) when another process owns DataDir. The start
// includes JetStream's recovery of the stored streams: after a kill -9,
// about a second per GB.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	lock, err := o.Lock, error(nil)
	if lock == nil {
		if lock, err = LockDataDir(o.DataDir); err != nil {
			return nil, err
		}
	}
	if err := unfinishedRestoreMark(o.DataDir); err != nil {
		_ = lock.Close()
		return nil, err
	}
	if err := usableStoreDir(filepath.Join(o.DataDir, "jetstream")); err != nil {
		_ = lock.Close()
		return nil, err
	}
	token := o.Token
	if token == "" {
		if token, err = loadOrCreateToken(filepath.Join(o.DataDir, TokenFile)); err != nil {
			_ = lock.Close()
			return nil, err
		}
		warnTokenFileMode(o.Log, filepath.Join(o.DataDir, TokenFile))
	}
	opts := &server.Options{
		ServerName:    "hookgate-embedded",
		JetStream:     true,
		StoreDir:      filepath.Join(o.DataDir, "jetstream"),
		NoSigs:        true,
		NoLog:         true,
		MaxPayload:    o.MaxPayload,
		Authorization: token,
		SyncAlways:    o.SyncAlways,
		DontListen:    o.Listen == "",
	}
	if o.Limits > 0 {
		// The limits plus the whole file system: room beside the streams'
		// reservations for the buckets without a limit (each sets aside a
		// byte), and more than the store can ever hold.
		opts.JetStreamMaxStore = o.Limits + max(fileSystemSize(o.DataDir), 1<<30)
		if opts.JetStreamMaxStore < o.Limits { // overflow
			opts.JetStreamMaxStore = math.MaxInt64
		}
	}
	if o.Listen != "" {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("nats.embedded.listen %q: %w", o.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("nats.embedded.listen %q: bad port", o.Listen)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		} else if l, err := net.Listen("tcp", o.Listen); err != nil {
			// The server, logging nothing, would only fail to become
			// ready after 30 s: say what is wrong now.
			_ = lock.Close()
			return nil, fmt.Errorf("nats.embedded.listen %s: %w", o.Listen, err)
		} else {
			_ = l.Close()
		}
		opts.Host, opts.Port = host, p
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	e := &Embedded{srv: srv, token: token, lock: lock}
	e.serverLog = &serverLog{log: o.Log, e: e, last: map[string]time.Time{}}
	srv.SetLogger(e.serverLog, false, false)
	began := time.Now()
	// Start recovers every stream before it returns: after an unclean
	// stop, a read of every stored byte.
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		_ = lock.Close()
		return nil, errors.New("embedded nats-server did not become ready within 30s")
	}
	if rebuilt := e.serverLog.Rebuilt(); len(rebuilt) > 0 && o.Log != nil {
		o.Log.Info("event store state rebuilt after the unclean stop", slog.String("streams", strings.Join(rebuilt, ",")),
			slog.Duration("took", time.Since(began).Round(time.Millisecond)))
	}
	if o.Listen != "" {
		e.url = srv.ClientURL()
	}
	return e, nil
}

// fileSystemSize is the size of the file system dir is on, 0 when unknown.
func fileSystemSize(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * int64(st.Bsize)
}

// Server returns the running server, for in-process connections.
func (e *Embedded) Server() *server.Server { return e.srv }

// ClientURL is the TCP address clients use, or "" when not listening.
func (e *Embedded) ClientURL() string { return e.url }

// Token returns the client token. Never log it.
func (e *Embedded) Token() string { return e.token }

// Shutdown stops the server, waits for it, and releases data_dir.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	_ = e.lock.Close()
}

// HasStore reports whether dir holds an embedded server's store with a
// WEBHOOKS stream in it, so serve can tell a first start on dir from a
// start again. An operator command that opened an empty dir (status on a
// moved config's data_dir) leaves a JetStream directory but no stream, so
// the directory alone is no sign of one (review AP).
func HasStore(dir string) bool {
	// <data_dir>/jetstream is the store dir; the server keeps streams
	// under jetstream/<account>/streams/<name> in it. Read, not globbed:
	// data_dir is a path, not a pattern ("[eu-1]"; review AQ).
	accounts := filepath.Join(dir, "jetstream", "jetstream")
	entries, err := os.ReadDir(accounts)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(accounts, e.Name(), "streams", StreamWebhooks)); err == nil {
			return true
		}
	}
	return false
}

// LockDataDir takes an exclusive advisory lock on dir, creating dir if it
// is missing. The returned file
// holds the lock until closed (or the process dies: the kernel drops it,
// so a kill -9 never leaves a stale lock).
func LockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data_dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		// The path once, and what to do (audit 42: "open lock P: open P:
		// is a directory").
		return nil, fmt.Errorf("nats.embedded.data_dir: its lock file %s cannot be opened (%v): it must be a file this user can write (run serve as the user that owns data_dir, or move away what is in its place)", path, pathless(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		pid := strings.TrimSpace(string(holder))
		if pid == "" {
			pid = "unknown"
		}
		return nil, fmt.Errorf("%w: data_dir %s is held by process %s", ErrDataDirLocked, dir, pid)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// LockHolder returns the pid of the process that holds dir's lock
// ("unknown" when it wrote none), "" when no process does. It creates and
// writes nothing.
func LockHolder(dir string) string {
	path := filepath.Join(dir, LockFile)
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	// Taken for a moment when free: a serve starting in that moment on
	// this data_dir is told it is held (its pid file names the last
	// holder). Only "would block" is a holder: another error (a file
	// system without flock) says nothing of one.
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return ""
	case !errors.Is(err, syscall.EWOULDBLOCK):
		return ""
	}
	holder, _ := os.ReadFile(path)
	if pid := strings.TrimSpace(string(holder)); pid != "" {
		return pid
	}
	return "unknown"
}

// ReadToken returns the token stored in dir's token file.
func ReadToken(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, TokenFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// warnTokenFileMode warns when the token file is open to other users:
// hookgate writes it 0600, but one made by hand is used as it is, and the
// token allows everything on the embedded server.
func warnTokenFileMode(log *slog.Logger, path string) {
	fi, err := os.Stat(path)
	if log == nil || err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	log.Warn("the NATS token file is readable by other users; whoever reads it may read, write and delete every stream: chmod 600 it",
		slog.String("file", path), slog.String("mode", fmt.Sprintf("%04o", fi.Mode().Perm())))
}

func loadOrCreateToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read token file: %w", err)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t := hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write token file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write token file: %w", err)
	}
	return t, nil
}

// pathless is a file error without its path, for a message that names
// the file already: "permission denied", "is a directory".
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// usableStoreDir refuses a store directory nats-server cannot use: a file
// in its place, or one this user cannot write. The server says so in its
// own log only and never becomes ready: serve waited 30 s and ended "did
// not become ready" (audit 42). One that does not exist yet is fine.
func usableStoreDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("nats.embedded.data_dir: the event store %s cannot be read: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("nats.embedded.data_dir: %s, where the event store's directory belongs, is a file: move it away (a copy or restore gone wrong?)", dir)
	}
	probe, err := os.CreateTemp(dir, ".hookgate-write-check-*")
	if err != nil {
		return fmt.Errorf("nats.embedded.data_dir: the event store %s is not writable by this user (%v): run serve as the user that owns it, or fix its permissions", dir, pathless(err))
	}
	name := probe.Name()
	_ = probe.Close()
	_ = os.Remove(name)
	return nil
}
