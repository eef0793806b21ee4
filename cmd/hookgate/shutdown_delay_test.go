package main

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// With http.shutdown_delay, a SIGTERM first drains: /readyz answers 503
// (a load balancer takes the instance out), webhooks are still taken, and
// a sender's request on its idle keep-alive connection is answered with
// Connection: close instead of meeting a connection closed under it (the
// resets review E counted at a SIGTERM under load). After the delay serve
// stops as before.
func TestShutdownDelayDrains(t *testing.T) {
	const delay = 8 * time.Second
	cfgPath := review9gConfig(t, t.TempDir(), freeAddr(t), `listen: "127.0.0.1:0", shutdown_delay: 8s`)
	s := review7Start(t, cfgPath, true)
	sender := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(sender.CloseIdleConnections)
	if code, st, err := review7Send(sender, s.base, "before"); err != nil || code != 200 || st != "accepted" {
		t.Fatalf("before the stop: %d %q %v", code, st, err)
	}
	stopped := time.Now()
	s.cancel() // SIGTERM
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		code, body := reviewMGetWith(probe, s.base, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "stopping") {
			break
		}
		if time.Since(stopped) > delay*3/4 {
			t.Fatalf("/readyz %d %q %v after the stop; want 503 saying it is stopping, within the delay", code, body, time.Since(stopped))
		}
		time.Sleep(20 * time.Millisecond)
	}
	req, err := review7Request(s.base, "while-draining")
	if err != nil {
		t.Fatal(err)
	}
	reused := false
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
	resp, err := sender.Do(req)
	if err != nil {
		t.Fatalf("a webhook on the sender's keep-alive connection while draining: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"accepted"`) || !resp.Close || !reused {
		t.Fatalf("while draining: %d %s, Connection: close %v, on the kept connection %v; want 200 accepted, closing the connection it came on", resp.StatusCode, b, resp.Close, reused)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve stopped with %v", err)
	}
	if took := time.Since(stopped); took < delay {
		t.Fatalf("serve stopped %v after SIGTERM, before http.shutdown_delay %v", took, delay)
	}
}
