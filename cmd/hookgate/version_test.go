package main

import (
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// `hookgate version` names the build: the link-time version, else what the
// go command stamped (a module version, or the checkout's revision).
func TestVersionOf(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "d81f267abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}}
	for _, tt := range []struct {
		name   string
		linked string
		info   *debug.BuildInfo
		ok     bool
		want   string
	}{
		{"set at link time", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, true, "v1.2.3"},
		{"no build info", "dev", nil, false, "dev"},
		{"module version (go install pkg@v1.4.0)", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, true, "v1.4.0"},
		{"pseudo-version from the checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261203031500-d81f267abcde+dirty"}}, true, "v0.0.0-20261203031500-d81f267abcde+dirty"},
		{"devel with a revision", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, true, "dev (d81f267abcde+dirty)"},
		{"devel without a revision", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev"},
	} {
		if got := versionOf(tt.linked, tt.info, tt.ok); got != tt.want {
			t.Errorf("%s: versionOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// serve's JSON log lines write durations readably, in groups too.
func TestReadableDurationInLogs(t *testing.T) {
	var b strings.Builder
	l := slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: readableDuration}))
	l.Info("x", slog.Duration("horizon", 96*time.Hour), slog.Group("g", slog.Duration("in", 1500*time.Millisecond)), slog.Int("n", 3))
	if want := `"horizon":"96h0m0s","g":{"in":"1.5s"},"n":3`; !strings.Contains(b.String(), want) {
		t.Errorf("log line %s lacks %s", b.String(), want)
	}
}
