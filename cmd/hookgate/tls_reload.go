package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certLookEvery bounds how often a handshake looks at http.tls's files.
const certLookEvery = time.Second

// certReloader serves http.tls's certificate and key, read again when
// either file changes (its modification time or size: a renewal by certbot
// or cert-manager's symlink swap), looked at no more than once a second,
// at a handshake. Loaded once at start only, a renewed certificate was
// served from the next restart on, and an edge that runs for months served
// the expired one until then: every sender's TLS handshake failed. A pair
// that does not load (the certificate written, the key not yet) keeps the
// previous one, with a warning once per such state, and is tried again at
// the next look. Safe for concurrent use.
type certReloader struct {
	certPath, keyPath string
	log               *slog.Logger
	now               func() time.Time

	mu       sync.Mutex
	pair     *tls.Certificate
	stamp    string // both files' stamps at the last load or look
	lastLook time.Time
}

// newCertReloader loads the pair; its error names both keys.
func newCertReloader(certPath, keyPath string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certPath: certPath, keyPath: keyPath, log: log, now: time.Now}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("http.tls.cert %s and http.tls.key %s: %w", certPath, keyPath, err)
	}
	r.pair, r.stamp, r.lastLook = &pair, r.fileStamp(), r.now()
	return r, nil
}

// fileStamp describes both files as they are now; "" for a file that
// cannot be read.
func (r *certReloader) fileStamp() string {
	st := func(p string) string {
		fi, err := os.Stat(p)
		if err != nil {
			return "?"
		}
		return fmt.Sprintf("%d/%d", fi.ModTime().UnixNano(), fi.Size())
	}
	return st(r.certPath) + " " + st(r.keyPath)
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.lastLook) < certLookEvery {
		return r.pair, nil
	}
	r.lastLook = now
	stamp := r.fileStamp()
	if stamp == r.stamp {
		return r.pair, nil
	}
	// Looked at once per state: a pair that does not load is tried again
	// when a file changes again (the rest of it written).
	r.stamp = stamp
	pair, err := tls.LoadX509KeyPair(r.certPath, r.keyPath)
	if err != nil {
		if r.log != nil {
			r.log.Warn("http.tls: the certificate or key changed and does not load; still serving the previous one",
				slog.String("cert", r.certPath), slog.String("key", r.keyPath), slog.String("error", err.Error()))
		}
		return r.pair, nil
	}
	r.pair = &pair
	if r.log != nil {
		attrs := []any{slog.String("cert", r.certPath)}
		if pair.Leaf != nil { // parsed by LoadX509KeyPair
			attrs = append(attrs, slog.Time("not_after", pair.Leaf.NotAfter))
		}
		r.log.Info("http.tls: certificate reloaded", attrs...)
	}
	return r.pair, nil
}
