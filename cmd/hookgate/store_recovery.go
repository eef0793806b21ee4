package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookgate/hookgate/jetstream"
)

// errStoreWritesAgain ends one run of serve so that it starts again in
// place: the embedded server's store stopped writing after a write error
// (a full disk) and data_dir has room again. nats-server keeps such an
// error until the store is opened again, and serve's own start (the
// deliveries a stopped consumer left redelivered first, the key index read
// back) is the tested way to open it.
var errStoreWritesAgain = errors.New("the event store can write again")

const (
	// storeRecoveryCheck: how often a store that stopped writing looks for
	// room again.
	storeRecoveryCheck = 5 * time.Second
	// roomFree and roomProbe: data_dir has room again when its file system
	// has roomFree bytes free for this user and a file of roomProbe bytes
	// can be written there (a block of the store grows by up to 8 MB; a
	// quota or a file size limit shows only in a write).
	roomFree  = 64 << 20
	roomProbe = 4 << 20
)

// watchStoreRecovery returns errStoreWritesAgain once the embedded server's
// store has stopped writing and dir can take writes again, not before
// notBefore (restartPace); nil when ctx ends.
func watchStoreRecovery(ctx context.Context, e *jetstream.Embedded, dir string, notBefore time.Time, logger *slog.Logger) error {
	t := time.NewTicker(storeRecoveryCheck)
	defer t.Stop()
	var saidAt time.Time // when the reason was last logged; zero: never
	saidPaced := false   // whether that reason was the pace
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if e.WriteError() == nil {
			continue
		}
		paced, err := roomOrPace(dir, notBefore)
		if err != nil {
			// Once per kind of reason (no room, or the pace), and again
			// every minute: the bytes free change at each look.
			if saidAt.IsZero() || paced != saidPaced || time.Since(saidAt) >= time.Minute {
				logger.Warn("event store stopped writing: serve starts again by itself once data_dir has room", slog.String("waiting_for_room", err.Error()))
				saidAt, saidPaced = time.Now(), paced
			}
			continue
		}
		logger.Warn("data_dir has room again: serve stops and starts again in place, which opens the event store again")
		return errStoreWritesAgain
	}
}

// roomOrPace's why is nil once dir has room (roomToWrite) and notBefore
// has passed; else it says why not, paced when only the pace holds serve
// back (a store that fails again soon after each start, a failing disk
// whose writes the page cache took for the probe, must not start serve
// in a loop: restartPace).
func roomOrPace(dir string, notBefore time.Time) (paced bool, why error) {
	if err := roomToWrite(dir); err != nil {
		return false, err
	}
	if time.Now().Before(notBefore) {
		return true, fmt.Errorf("room again, but the store failed again soon after serve last started: next start at %s", notBefore.UTC().Format(time.RFC3339))
	}
	return false, nil
}

// waitForRoom logs why the store could not start (cause) and waits until
// dir has room (roomToWrite) and notBefore has passed, saying so again
// every minute; false when ctx ended first.
func waitForRoom(ctx context.Context, dir string, notBefore time.Time, cause error, logger *slog.Logger) bool {
	// data_dir stays locked meanwhile: an operator's CLI that opened it
	// itself would make the next start fail as "in use" (found by review).
	if lock, err := jetstream.LockDataDir(dir); err == nil {
		defer lock.Close()
	}
	var saidAt time.Time
	for {
		_, room := roomOrPace(dir, notBefore)
		if room == nil {
			logger.Warn("data_dir has room again: serve starts again, which opens the event store")
			return true
		}
		if saidAt.IsZero() || time.Since(saidAt) >= time.Minute {
			logger.Warn("event store cannot start: data_dir is full; serve starts again by itself once data_dir has room (free space under it, or mend the disk)",
				slog.String("error", cause.Error()), slog.String("waiting_for_room", room.Error()))
			saidAt = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(storeRecoveryCheck):
		}
	}
}

// diskFull reports an error of a store that could not write for want of
// room (ENOSPC, or a quota: EDQUOT), also as nats-server's API error quotes
// it. Any other write error (a failing disk) ends serve as before.
func diskFull(err error) bool {
	msg := err.Error()
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(msg, "no space left on device") || strings.Contains(msg, "disk quota exceeded")
}

// roomToWrite is nil when dir's file system has roomFree bytes free for
// this user and a file of roomProbe bytes can be written in dir (it is
// removed at once); else it says what is short.
func roomToWrite(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	free := st.Bavail * uint64(st.Bsize)
	if os.Geteuid() == 0 {
		// root writes into the blocks the file system keeps back from
		// others (5% on ext4), so its store fills only when none is left:
		// counting them is what root can write (review R).
		free = st.Bfree * uint64(st.Bsize)
	}
	if free < roomFree {
		return fmt.Errorf("%d bytes free in %s, fewer than %d", free, dir, roomFree)
	}
	f, err := os.CreateTemp(dir, ".room-probe-*")
	if err != nil {
		return fmt.Errorf("probe file in %s: %w", dir, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = f.Write(make([]byte, roomProbe))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %d bytes in %s: %w", roomProbe, dir, err)
	}
	return nil
}

// restartPace spaces serve's starts again: a store that fails again soon
// after one (a failing disk whose writes the page cache took, a disk
// filled again at once) would otherwise start serve again every few
// seconds.
type restartPace struct {
	last time.Time // the last start again; zero: none yet
	n    int       // starts again before it in a row, each within restartCalm of the one before
}

// restartCalm: a start again this long after the one before begins a new
// row.
const restartCalm = 10 * time.Minute

// started records a start again at now.
func (p *restartPace) started(now time.Time) {
	if !p.last.IsZero() && now.Sub(p.last) < restartCalm {
		p.n++
	} else {
		p.n = 0
	}
	p.last = now
}

// notBefore is the earliest time of the next start again: any time before
// the first; then 5 s after the last, doubling with each one in a row, 5
// minutes at most.
func (p *restartPace) notBefore() time.Time {
	if p.last.IsZero() {
		return time.Time{}
	}
	return p.last.Add(min(5*time.Second<<min(p.n, 6), 5*time.Minute))
}

// carried is what a run of serve hands the next one when it starts again
// in place: data_dir's lock and the HTTP listening sockets, held across
// the gap between the runs. Let go, another process could take them (an
// operator's CLI that opens data_dir itself when nothing answers: the
// second start then failed, and serve exited), and connections were
// refused meanwhile, /healthz too (review R). Held, connections wait in
// the kernel's queue and are answered by the next run.
type carried struct {
	lock    *os.File // a duplicate of data_dir's lock, nil when none
	lockDir string
	sockets map[string]*net.TCPListener // by the configured address
}

// takeLock returns the carried lock when it is dir's, else nil (closing a
// carried lock of another dir: the config changed).
func (c *carried) takeLock(dir string) *os.File {
	l := c.lock
	c.lock = nil
	if l != nil && c.lockDir != dir {
		_ = l.Close()
		return nil
	}
	return l
}

// takeSocket returns the carried socket for addr, nil when none.
func (c *carried) takeSocket(addr string) *net.TCPListener {
	s := c.sockets[addr]
	delete(c.sockets, addr)
	return s
}

// close lets go of whatever is still carried.
func (c *carried) close() {
	if c.lock != nil {
		_ = c.lock.Close()
		c.lock = nil
	}
	c.closeSockets()
}

// closeSockets closes the carried sockets.
func (c *carried) closeSockets() { c.keepSockets() }

// keepSockets closes the carried sockets but those of addrs (as
// configured; "" is none): the config read again names other addresses,
// and left open, connections to them would wait in a queue nobody serves.
func (c *carried) keepSockets(addrs ...string) {
	for a, s := range c.sockets {
		if a != "" && slices.Contains(addrs, a) {
			continue
		}
		_ = s.Close()
		delete(c.sockets, a)
	}
}

// closeListenerSockets closes listeners' sockets, kept or not.
func closeListenerSockets(listeners []listener) {
	for _, l := range listeners {
		_ = l.ln.TCPListener.Close()
	}
}

// dupFile returns a second descriptor of f's open file (close-on-exec).
// An flock lock belongs to the open file, so it holds while either is open.
func dupFile(f *os.File) (*os.File, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var derr error
	if err := raw.Control(func(old uintptr) {
		r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, old, syscall.F_DUPFD_CLOEXEC, 0)
		fd, derr = int(r), nil
		if errno != 0 {
			derr = errno
		}
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dup %s: %w", f.Name(), derr)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// keptListener is an HTTP listener whose socket can outlive its server:
// once kept, closing it (as http.Server.Shutdown does) stops Accept but
// leaves the socket open for the next run.
type keptListener struct {
	*net.TCPListener
	addr   string // as configured
	keep   atomic.Bool
	closed atomic.Bool
	// ended is closed when Accept first fails after Close: the server's
	// accept loop has ended, every connection it accepted is tracked.
	ended   chan struct{}
	endOnce sync.Once
	// fresh counts the server's connections that have not read their
	// first request yet (connState, the server's ConnState hook).
	fresh    atomic.Int64
	freshSet sync.Map // net.Conn -> struct{}
}

func newKeptListener(tcp *net.TCPListener, addr string) *keptListener {
	return &keptListener{TCPListener: tcp, addr: addr, ended: make(chan struct{})}
}

func (l *keptListener) Accept() (net.Conn, error) {
	c, err := l.TCPListener.Accept()
	if err != nil && l.closed.Load() {
		l.endOnce.Do(func() { close(l.ended) })
		return nil, net.ErrClosed
	}
	return c, err
}

// connState is the server's ConnState hook: it keeps fresh.
func (l *keptListener) connState(c net.Conn, s http.ConnState) {
	if s == http.StateNew {
		l.freshSet.Store(c, struct{}{})
		l.fresh.Add(1)
		return
	}
	if _, ok := l.freshSet.LoadAndDelete(c); ok {
		l.fresh.Add(-1)
	}
}

// settle ends the accept loop of l's server and waits, until deadline at
// most, for the connections it accepted to read their first request. Go's
// server closes a connection without an answer when it reads the request
// after its Shutdown began, so a stop that starts again in place, where
// the process goes on and a liveness probe must be answered, lets them be
// read first: a probe accepted just before the Shutdown saw EOF (a CI
// run's TestReviewRHealthzAnswersThroughStartAgain). A connection that
// sends nothing by deadline is cut as before.
func (l *keptListener) settle(deadline time.Time) {
	_ = l.Close()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-l.ended:
	case <-t.C:
		return
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for l.fresh.Load() > 0 {
		select {
		case <-tick.C:
		case <-t.C:
			return
		}
	}
}

// Close closes the socket, or, when kept, makes Accept return (a deadline
// in the past) and leaves it open.
func (l *keptListener) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	if l.keep.Load() {
		return l.SetDeadline(time.Unix(1, 0))
	}
	return l.TCPListener.Close()
}
