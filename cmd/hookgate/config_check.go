package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hookgate/hookgate/config"
)

// runConfigCheck prints one line per problem; exit 1 on any error,
// 0 with warnings alone.
func runConfigCheck(args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "config file")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	path := *cfgPath
	if fs.NArg() > 1 && isHelp(fs.Arg(1)) {
		// Help after FILE, as `trace KEY --help` takes it (audit 42).
		return parseFlags(fs, fs.Args()[1:], stdout)
	}
	if fs.NArg() > 1 {
		// Flags end at FILE: a flag after it ("FILE --json") would
		// otherwise be ignored and the check answer ok (review 9).
		return usagef("config check: unexpected argument %q after the config file", fs.Arg(1))
	}
	if fs.NArg() > 0 {
		if path != "" && path != fs.Arg(0) {
			return usagef("config check: two config files (--config %s and %s); give one", path, fs.Arg(0))
		}
		path = fs.Arg(0)
	}
	if path == "" {
		path = getenv("HOOKGATE_CONFIG")
	}
	if path == "" {
		return usagef("config check: no config file; want 'hookgate config check FILE'")
	}
	cfg, err := config.Load(path, getenv)
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				fmt.Fprintf(stdout, "%s: %s\n", path, p)
			}
			return silentError{1}
		}
		return err
	}
	ps := cfg.Check()
	for _, p := range ps {
		fmt.Fprintf(stdout, "%s: %s\n", path, p)
	}
	if len(ps.Errors()) > 0 {
		return silentError{1}
	}
	if len(ps) == 0 {
		fmt.Fprintf(stdout, "%s: ok\n", path)
	}
	return nil
}

// loadConfig loads and validates the config named by --config or
// HOOKGATE_CONFIG; problems come back as one error, a line each.
func loadConfig(path string, getenv func(string) string) (*config.Config, error) {
	if path == "" {
		path = getenv("HOOKGATE_CONFIG")
	}
	if path == "" {
		return nil, usagef("no config: pass --config FILE or set HOOKGATE_CONFIG")
	}
	cfg, err := config.Load(path, getenv)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		// One line for one problem (a missing file); a line each for more.
		sep := ": "
		if strings.Contains(err.Error(), "\n") {
			sep = ":\n"
		}
		return nil, fmt.Errorf("config %s%s%w", path, sep, err)
	}
	return cfg, nil
}
