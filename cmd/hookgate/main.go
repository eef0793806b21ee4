// Command hookgate is the webhook ingestion pipeline's one binary: the
// gateway and consumers (serve), and the operator's tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	// SIGHUP stops cleanly too: its default action ended the process at
	// once, an unclean stop with the store's recovery after it, for an
	// operator who sent it hoping for a reload (the config is read at
	// start only; README, Configuration). Unless it is ignored (nohup):
	// asking for it would undo that, and a serve started with nohup
	// would stop when its session ends (a review, stop 38).
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	// The first signal starts a clean stop; a second one ends the process
	// at once (the signal's default action), as an operator pressing
	// Ctrl-C again expects of a stop that waits out http.shutdown_delay.
	go func() { <-ctx.Done(); stop() }()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError is a command-line mistake: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// silentError carries an exit code whose message was already printed.
type silentError struct{ code int }

func (e silentError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var s silentError
	if errors.As(err, &s) {
		return s.code
	}
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintf(stderr, "hookgate: %s\nRun 'hookgate help' for usage.\n", u.msg)
		return 2
	}
	fmt.Fprintf(stderr, "hookgate: %s\n", err)
	return 1
}

const usage = `hookgate: webhook ingestion that counts every event exactly once.

Usage:
  hookgate serve --config FILE            gateway and consumers
  hookgate config check FILE              validate a config, one line per problem
  hookgate sign --config FILE --provider P [--id ID] [--timestamp UNIX] < body
                                          print the headers P's scheme would send
  hookgate replay --config FILE [--since T] [--until T] [--from-seq N] [--to-seq N]
                  [--provider P] [--subject S] [--dry-run] [--redeliver] [--force]
                                          re-feed stored events through the consumer rules
  hookgate dlq list|show SEQ|replay (SEQ... | --all)|remove (SEQ... | --all) --config FILE
               [--provider P] [--reason TEXT] [--dry-run]
                                          dead letters: inspect, re-feed, or remove unfed
  hookgate trace KEY --config FILE [--json]
                                          everything known about one event
  hookgate status --config FILE [--json]  running serves, streams, consumer lag, DLQ depth, dedup store size
  hookgate watermarks prune --config FILE [--older-than D] [--provider P] [--dry-run]
                                          remove marks too old to decide any event
  hookgate backup --config FILE --out DIR snapshot every stream of the running system
  hookgate restore --config FILE --from DIR
                                          recreate the streams from a backup on a new data_dir
  hookgate version

HOOKGATE_CONFIG may stand in for --config.
`

// run is the whole program, testable without a process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return silentError{2}
	}
	switch args[0] {
	case "serve":
		err := runServe(ctx, args[1:], getenv, stdout, stderr)
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Stopped while starting: a clean stop, not a failure.
			return nil
		}
		return err
	case "config":
		if len(args) == 2 && isHelp(args[1]) {
			return runConfigCheck([]string{"-help"}, getenv, stdout)
		}
		if len(args) < 2 || args[1] != "check" {
			return usagef("want 'hookgate config check FILE'")
		}
		return runConfigCheck(args[2:], getenv, stdout)
	case "sign":
		return runSign(args[1:], getenv, stdin, stdout, stderr)
	case "replay":
		return runReplay(ctx, args[1:], getenv, stdout, stderr)
	case "dlq":
		return runDLQ(ctx, args[1:], getenv, stdout, stderr)
	case "watermarks":
		return runWatermarks(ctx, args[1:], getenv, stdout, stderr)
	case "backup":
		return runBackup(ctx, args[1:], getenv, stdout, stderr)
	case "restore":
		return runRestore(ctx, args[1:], getenv, stdout, stderr)
	case "status":
		return runStatus(ctx, args[1:], getenv, stdout, stderr)
	case "trace":
		return runTrace(ctx, args[1:], getenv, stdout, stderr)
	case "version":
		if len(args) == 2 && isHelp(args[1]) {
			// Every command answers -h/--help with its usage (an
			// operations audit, stop 41).
			fmt.Fprintln(stdout, "usage: hookgate version\nprints the binary's version")
			return nil
		}
		if len(args) > 1 {
			return usagef("version: unexpected argument %q", args[1])
		}
		fmt.Fprintln(stdout, "hookgate", buildVersion())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usagef("unknown command %q", args[0])
}

// version may be set at link time (-ldflags "-X main.version=v1.2.3");
// otherwise buildVersion reads what the go command recorded.
var version = "dev"

// buildVersion is the binary's version: version when set at link time,
// else the main module's version the go command stamped into the binary
// (a release tag, or since Go 1.24 a pseudo-version from the checkout's
// commit with +dirty for uncommitted changes), else its VCS revision,
// else "dev".
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	return versionOf(version, info, ok)
}

func versionOf(linked string, info *debug.BuildInfo, ok bool) string {
	if linked != "dev" || !ok {
		return linked
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return linked
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+dirty"
	}
	return "dev (" + rev + ")"
}
