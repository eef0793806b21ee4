package jetstream

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// A restore's chunk sent before the interest of the server that took the
// restore reached this connection's server finds no responder; it is sent
// again once the subscriber is there, instead of failing the restore.
func TestRequestDeliveredWaitsForTheSubscriber(t *testing.T) {
	c, _ := silentEnv(t)
	const subject = "restore.deliver.x"
	subscribed := false
	got, err := requestDelivered(t.Context(), c, subject, []byte("chunk"), func() {
		if subscribed {
			return
		}
		subscribed = true // only now, after a request found no responder
		if _, err := c.NC.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte("took " + string(m.Data))) }); err != nil {
			t.Error(err)
		}
		if err := c.NC.Flush(); err != nil {
			t.Error(err)
		}
	})
	if err != nil || string(got.Data) != "took chunk" || !subscribed {
		t.Fatalf("answer %v, %v (subscribed after a miss: %v); want the chunk taken on a later try", got, err, subscribed)
	}
}
