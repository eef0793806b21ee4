package main

import (
	"os"
	"testing"
)

// retention.*.max_bytes are ceilings, not space set aside: serve starts
// when their sum is more than the disk has free. Left to itself the
// embedded server sets aside every stream's max_bytes against 75% of the
// free disk at each start, so a config whose limits outgrow the free
// space failed to start ("stream full", naming whichever stream or bucket
// came last), also the first start of the default config (31 GB of
// limits) on a small disk, and a restart after a disk-full incident with
// only some space freed (review L). A full disk is reported where it
// happens instead (readyz, the log; see Known limits).
func TestServeStartsWithLimitsAboveTheFreeDisk(t *testing.T) {
	cfgPath := review9gConfig(t, t.TempDir(), freeAddr(t), `listen: "127.0.0.1:0"`)
	appendConfig(t, cfgPath, "retention: { webhooks: { max_bytes: 900TB }, grants: { max_bytes: 900TB } }\n")
	s := review7Start(t, cfgPath, true)
	review7MustSend(t, s.base, "big-limits", "accepted")
}

// appendConfig adds YAML to the end of a config file.
func appendConfig(t *testing.T, path, yaml string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(yaml); err != nil {
		t.Fatal(err)
	}
}
