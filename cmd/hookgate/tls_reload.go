package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// certLookEvery bounds how often a handshake looks at http.tls's files.
const certLookEvery = time.Second

// certReloader serves http.tls's certificate and key, read again when
// either file changes (its modification time, size or inode: a renewal by
// certbot or cert-manager's symlink swap), looked at no more than once a
// second, at a handshake. Loaded once at start only, a renewed certificate
// was served from the next restart on, and an edge that runs for months
// served the expired one until then: every sender's TLS handshake failed.
// A pair that does not load (the certificate written, the key not yet; a
// key not yet readable; out of file descriptors) keeps the previous one,
// warned once per state of the files, and is tried again at each look
// until it loads (review AQ: it was tried once per state, so a load that
// failed for a passing reason was never tried again). One handshake looks
// at a time; the others, meanwhile, get the pair in memory at once, so a
// file read that hangs (a hard NFS mount) holds one handshake, not all of
// them (review AQ). Safe for concurrent use.
type certReloader struct {
	certPath, keyPath string
	log               *slog.Logger
	now               func() time.Time
	loadPair          func(certFile, keyFile string) (tls.Certificate, error)

	pair     atomic.Pointer[tls.Certificate]
	lastLook atomic.Int64 // Unix ns

	look   sync.Mutex // held by the one handshake looking at the files
	loaded string     // the files' stamp when pair was loaded
	warned string     // the stamp last warned about

	// lookSince is when the look under way began (Unix ns; 0: none), so a
	// handshake can tell a look that hangs (a hard NFS mount, a FIFO) and
	// say so once: renewals are not read meanwhile (review AR).
	lookSince   atomic.Int64
	stuckWarned atomic.Bool
}

// certLookStuck is how long a look may take before it is said to hang.
const certLookStuck = 30 * time.Second

// newCertReloader loads the pair; its error names both keys.
func newCertReloader(certPath, keyPath string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certPath: certPath, keyPath: keyPath, log: log, now: time.Now, loadPair: tls.LoadX509KeyPair}
	// Stamped before the read: a renewal between the two is read again.
	stamp := r.fileStamp()
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("http.tls.cert %s and http.tls.key %s: %w", certPath, keyPath, err)
	}
	r.pair.Store(&pair)
	r.loaded = stamp
	r.lastLook.Store(r.now().UnixNano())
	return r, nil
}

// fileStamp describes both files as they are now; "?" for a file that
// cannot be looked at.
func (r *certReloader) fileStamp() string {
	return statStamp(r.certPath) + " " + statStamp(r.keyPath)
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	now := r.now()
	if now.UnixNano()-r.lastLook.Load() < int64(certLookEvery) {
		return r.pair.Load(), nil
	}
	if !r.look.TryLock() {
		if since := r.lookSince.Load(); since != 0 && now.UnixNano()-since > int64(certLookStuck) && r.log != nil && r.stuckWarned.CompareAndSwap(false, true) {
			r.log.Warn("http.tls: reading the certificate or key has not returned; still serving the pair loaded before, renewals are not read until it does",
				slog.String("cert", r.certPath), slog.String("key", r.keyPath), slog.Duration("for", time.Duration(now.UnixNano()-since)))
		}
		return r.pair.Load(), nil
	}
	defer r.look.Unlock()
	r.lookSince.Store(now.UnixNano())
	defer func() { r.lookSince.Store(0); r.stuckWarned.Store(false) }()
	r.lastLook.Store(now.UnixNano())
	stamp := r.fileStamp()
	if stamp == r.loaded {
		return r.pair.Load(), nil
	}
	pair, err := r.loadPair(r.certPath, r.keyPath)
	if err != nil {
		if r.log != nil && stamp != r.warned {
			r.log.Warn("http.tls: the certificate or key changed and does not load; still serving the previous one, trying again each second",
				slog.String("cert", r.certPath), slog.String("key", r.keyPath), slog.String("error", err.Error()))
		}
		r.warned = stamp
		return r.pair.Load(), nil
	}
	r.pair.Store(&pair)
	r.loaded, r.warned = stamp, ""
	if r.log != nil {
		attrs := []any{slog.String("cert", r.certPath)}
		if pair.Leaf != nil { // parsed by LoadX509KeyPair
			attrs = append(attrs, slog.Time("not_after", pair.Leaf.NotAfter))
		}
		r.log.Info("http.tls: certificate reloaded", attrs...)
	}
	return &pair, nil
}

// statStamp is a file's modification time, size and inode ("?" when it
// cannot be looked at): a copy that keeps the old time (cp -p) and size
// is still a new inode.
func statStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%d/%d/%d", fi.ModTime().UnixNano(), fi.Size(), ino)
}
