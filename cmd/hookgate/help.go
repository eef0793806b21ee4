package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseFlags parses a command's flags. Asked for help (-h, -help,
// --help), it prints the command's help to stdout and returns an error
// that exits 0 with nothing more said: before, an operator reaching for
// a command's flags got "flag: help requested" and exit 2. Any other
// flag error is a usage error (exit 2) prefixed with the command's name.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		commandHelp(stdout, fs)
		return silentError{0}
	case err != nil:
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

// isHelp reports whether a command's first word asks for help instead of
// naming a subcommand (`hookgate dlq --help`).
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// commandHelp prints the usage text's lines for fs's command (its first
// word: "dlq list" prints dlq's), then fs's flags.
func commandHelp(w io.Writer, fs *flag.FlagSet) {
	word := strings.Fields(fs.Name())[0]
	fmt.Fprintln(w, "Usage:")
	in := false
	for line := range strings.SplitSeq(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  hookgate "+word+" "):
			in = true
		case strings.HasPrefix(line, "  hookgate "), !strings.HasPrefix(line, "   "):
			in = false
		}
		if in {
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprintln(w, "\nHOOKGATE_CONFIG may stand in for --config. Exit 0 on success, 1 on an error to fix, 2 on a usage error.")
}
