package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every command answers -h / --help with its usage lines and flags on
// stdout, exit 0; before, each said "flag: help requested" and exited 2.
// An unknown flag stays a usage error.
func TestEveryCommandAnswersHelp(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		usage string // the usage line printed
		flag  string // a flag of the command's listed
	}{
		{[]string{"serve", "--help"}, "hookgate serve --config FILE", "-config"},
		{[]string{"config", "check", "-h"}, "hookgate config check FILE", "-config"},
		{[]string{"config", "--help"}, "hookgate config check FILE", "-config"},
		{[]string{"sign", "--help"}, "hookgate sign --config FILE --provider P", "-timestamp"},
		{[]string{"replay", "--help"}, "hookgate replay --config FILE [--since T]", "-redeliver"},
		{[]string{"replay", "--config", "x.yaml", "-h"}, "hookgate replay", "-from-seq"},
		{[]string{"dlq", "--help"}, "hookgate dlq list|show SEQ|replay", "-reason"},
		{[]string{"dlq", "replay", "-h"}, "hookgate dlq list|show SEQ|replay", "-all"},
		{[]string{"trace", "--help"}, "hookgate trace KEY --config FILE", "-json"},
		{[]string{"status", "-help"}, "hookgate status --config FILE", "-json"},
		{[]string{"watermarks", "--help"}, "hookgate watermarks prune", "-older-than"},
		{[]string{"watermarks", "prune", "-h"}, "hookgate watermarks prune", "-older-than"},
		{[]string{"backup", "--help"}, "hookgate backup --config FILE --out DIR", "-out"},
		{[]string{"restore", "--help"}, "hookgate restore --config FILE --from DIR", "-from"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), tc.args, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
			var shown bytes.Buffer
			if code := exitCode(err, &shown); code != 0 {
				t.Fatalf("exit %d, want 0; stderr %q %q", code, errb.String(), shown.String())
			}
			if !strings.Contains(out.String(), "Usage:\n  "+tc.usage) || !strings.Contains(out.String(), "  "+tc.flag+" ") && !strings.Contains(out.String(), "  "+tc.flag+"\n") {
				t.Errorf("help lacks %q or the flag %s:\n%s", tc.usage, tc.flag, out.String())
			}
			// Only the command's own lines of the usage text.
			if n := strings.Count(out.String(), "  hookgate "); n != 1 {
				t.Errorf("%d usage lines, want the command's one:\n%s", n, out.String())
			}
			if errb.Len() > 0 || shown.Len() > 0 {
				t.Errorf("help wrote to stderr: %q %q", errb.String(), shown.String())
			}
		})
	}
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"replay", "--bogus"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	var shown bytes.Buffer
	if code := exitCode(err, &shown); code != 2 || !strings.Contains(shown.String(), "replay: flag provided but not defined: -bogus") {
		t.Errorf("an unknown flag: exit %d, %q; want 2 naming the flag", code, shown.String())
	}
}
