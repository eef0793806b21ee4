package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/jetstream"
)

// openForCLI reaches the running system for an operator command: through
// nats.url, or the embedded server's listen address with its token. When
// nothing answers there, it opens data_dir itself; the data_dir lock keeps
// it off a data_dir that a running serve holds, and says which process.
func openForCLI(ctx context.Context, cfg *config.Config, logger *slog.Logger, acc access) (*system, error) {
	if cfg.NATS.URL != "" {
		return openSystem(ctx, cfg, logger, "hookgate-cli", acc)
	}
	if listen := cfg.NATS.Embedded.Listen; listen != "" {
		token := cfg.NATS.Embedded.Token.Reveal()
		var tokenErr error // why data_dir's token file was not read
		if token == "" {
			t, err := jetstream.ReadToken(cfg.NATS.Embedded.DataDir)
			if err == nil {
				token = t
			} else if !errors.Is(err, fs.ErrNotExist) {
				tokenErr = err
			}
		}
		c, err := jetstream.Connect(jetstream.ConnectOptions{Name: "hookgate-cli", URL: "nats://" + listen, Token: token})
		switch {
		case err == nil:
			return &system{cfg: cfg, conn: c}, nil
		case errors.Is(err, jetstream.ErrAuthorization) && tokenErr != nil:
			// It went without a token: say why, not "check the file",
			// which holds the right one (audit 42: a 0600 file of the
			// service's user, read by an operator's own account).
			return nil, fmt.Errorf("nats at %s wants a token, and %s/%s could not be read (%v): run the command as the user that runs serve, or set nats.embedded.token", listen, cfg.NATS.Embedded.DataDir, jetstream.TokenFile, pathlessError(tokenErr))
		case errors.Is(err, jetstream.ErrAuthorization):
			return nil, fmt.Errorf("nats at %s refused the token: check nats.embedded.token or %s/%s", listen, cfg.NATS.Embedded.DataDir, jetstream.TokenFile)
		case !errors.Is(err, jetstream.ErrNoServer):
			return nil, fmt.Errorf("nats at %s: %w", listen, err)
		}
		// Nothing listens: hookgate is not running; open data_dir below.
	}
	// Opening a data_dir that is not there would create an empty one and
	// answer from it ("0 letters"): a wrong or copied config would look
	// like an all-clear (review 9).
	if dir := cfg.NATS.Embedded.DataDir; dir != "" {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("nats.embedded.data_dir %s does not exist: check the path (hookgate serve creates it at its first start)", dir)
		}
	}
	s, err := openSystem(ctx, cfg, logger, "hookgate-cli", acc)
	if errors.Is(err, jetstream.ErrDataDirLocked) {
		if cfg.NATS.Embedded.Listen == "" {
			return nil, fmt.Errorf("%w; set nats.embedded.listen so the CLI can reach the running hookgate", err)
		}
		// It holds data_dir but does not answer on listen yet: a serve
		// still recovering its store, or another command.
		return nil, fmt.Errorf("%w and nothing answers on nats.embedded.listen %s (a serve still starting, another command, or a serve whose config listens elsewhere): run this again once it is up, with the nats.embedded.listen its config has", err, cfg.NATS.Embedded.Listen)
	}
	return s, err
}

// cliContext bounds an operator command.
func cliContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Minute)
}

// startAudit runs an AUDIT writer; stop flushes what is queued. onFail
// (may be nil) counts lost records.
func startAudit(sys *system, logger *slog.Logger, buffer int, onFail func()) (*jetstream.AuditWriter, func()) {
	audit := jetstream.NewAuditWriter(sys.conn, logger, buffer, onFail)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = audit.Run(ctx); close(done) }()
	return audit, func() { cancel(); <-done }
}

// printable is s for a terminal: Go-quoted when it holds a character a
// terminal would act on or hide (a value stored raw by an older version,
// one stored quoted and read back exact, an answer on hookgate.instances
// from anything that subscribes there): a control character, C1 ones too
// (U+009B starts an escape sequence on many terminals), a formatting one
// (a right-to-left override), or bytes that are not UTF-8. They would
// otherwise break a line or a table, move the cursor, or disguise text.
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// pathlessError is a file error without its path (the message names the
// file already): "permission denied", "is a directory".
func pathlessError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
