package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/config"
	"github.com/hookgate/hookgate/gateway"
)

// forward.secrets through serve: every forwarded request carries one
// signature per secret, and the receiver verifies it whichever of the two
// it holds (the rotation the README describes), checked with the
// gateway's own standard-webhooks verifier.
func TestServeForwardSignsWithEverySecret(t *testing.T) {
	type request struct {
		header http.Header
		body   []byte
	}
	got := make(chan request, 4)
	fwd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- request{r.Header.Clone(), b}:
		default:
		}
	}))
	t.Cleanup(fwd.Close)
	const next = "whsec_bmV4dC1mb3J3YXJkLXNlY3JldC0wMTIzNDU2Nzg5"
	cfg := aoConfig(t, t.TempDir(), freeAddr(t), fwd.URL, "")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rotated := strings.Replace(string(data), `secret: "${AO_FWD_SECRET}"`, `secrets: ["`+next+`", "${AO_FWD_SECRET}"]`, 1)
	if rotated == string(data) {
		t.Fatal("setup: the config has no forward secret to replace")
	}
	if err := os.WriteFile(cfg, []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errb := aoRun(t, "config", "check", cfg); code != 0 {
		t.Fatalf("config check: exit %d\n%s%s", code, out, errb)
	}
	s := aoStart(t, cfg)
	if c := aoPost(t, s.base, aoSecret, aoEvent("e1", "G-1", 10)); c != 200 {
		t.Fatalf("event: %d", c)
	}
	var r request
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("nothing forwarded within 20 s")
	}
	sch, err := gateway.NewScheme("standard-webhooks", gateway.SchemeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{next, aoForwardSecret} {
		if err := sch.Verify(r.header, r.body, []config.Secret{config.Secret(sec)}, time.Now()); err != nil {
			t.Errorf("the receiver holding one of the two secrets refuses the forwarded request: %v (webhook-signature %q)", err, r.header.Get("webhook-signature"))
		}
	}
	if err := sch.Verify(r.header, r.body, []config.Secret{"whsec_c29tZS1vdGhlci1zZWNyZXQ="}, time.Now()); err == nil {
		t.Error("a receiver holding another secret accepts the forwarded request")
	}
}
