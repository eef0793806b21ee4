package jetstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// A replicated stream whose leader is left with fewer replicas than a
// write needs is not ready; a single replica, or one replica of three
// away, is.
func TestNoQuorum(t *testing.T) {
	since := time.Now().Add(-time.Minute)
	info := func(replicas int, peers ...*js.PeerInfo) *js.StreamInfo {
		i := &js.StreamInfo{Config: js.StreamConfig{Name: StreamWebhooks, Replicas: replicas}}
		if replicas > 1 {
			i.Cluster = &js.ClusterInfo{Leader: "n2", LeaderSince: &since, Replicas: peers}
		}
		return i
	}
	up := func(name string) *js.PeerInfo { return &js.PeerInfo{Name: name, Current: true, Active: time.Second} }
	down := func(name string) *js.PeerInfo { return &js.PeerInfo{Name: name, Offline: true} }
	silent := func(name string) *js.PeerInfo { return &js.PeerInfo{Name: name, Active: 30 * time.Second} }
	for _, c := range []struct {
		name string
		info *js.StreamInfo
		want string // "" ready
	}{
		{"one replica", info(1), ""},
		{"all up", info(3, up("n1"), up("n3")), ""},
		{"one of three away", info(3, down("n1"), up("n3")), ""},
		{"two of three away", info(3, down("n1"), silent("n3")), "stream WEBHOOKS has 1 of 3 replicas online, fewer than the 2 a write needs (offline: n1, n3)"},
		{"three of five away", info(5, down("n1"), down("n3"), down("n4"), up("n5")), "2 of 5 replicas online, fewer than the 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := NoQuorum(c.info)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("NoQuorum = %v, want ready", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrUnavailable)):
				t.Fatalf("NoQuorum = %v, want ErrUnavailable saying %q", err, c.want)
			}
		})
	}
}
