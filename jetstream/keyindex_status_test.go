package jetstream

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// statusStored stores three events, the middle one with a `Status` header
// (a request header the gateway stores, like any other, beside a body;
// with an empty body when empty, as releases before stop 28 did).
func statusStored(t *testing.T, c *Conn, status string, body []byte) []string {
	t.Helper()
	plain := NewPublisher(c, 5*time.Second)
	keys := []string{"p:a:evt:before", "p:a:evt:status", "p:a:evt:after"}
	for _, key := range keys {
		m := keyMsg(key)
		if key == "p:a:evt:status" {
			m.Header = nats.Header{"Hookgate-Key": {key}, "Status": {status}, "Description": {"Consumer Deleted"}}
			m.Body = body
		}
		if _, err := plain.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

var storedStatuses = []string{"100", "404", "408", "409", "503"}

// The key index reads events back headers only: an event stored with a
// `Status` header then has an empty body, which nats.go's fetch took for
// a status of the pull: the read-back stopped there (404, 408), failed
// (409 "consumer deleted", 503 "no responders") or skipped it (100), so
// the index did not open and the gateway answered 503 after a restart.
func TestKeyIndexReadsBackEventsStoredWithAStatusHeader(t *testing.T) {
	for _, status := range storedStatuses {
		t.Run(status, func(t *testing.T) {
			dir := t.TempDir()
			e, c := startEmbedded(t, dir, keyIndexStreams())
			defer e.Shutdown()
			defer c.Close()
			keys := statusStored(t, c, status, []byte(`{}`))
			done := make(chan *KeyIndex, 1)
			go func() { done <- openTestKeyIndex(t, c, dir) }()
			var k *KeyIndex
			select {
			case k = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("key index not open 60 s after it began reading back 3 events")
			}
			if k == nil {
				return // openTestKeyIndex failed the test
			}
			for _, key := range keys {
				if _, ok := k.idx.Lookup(key); !ok {
					t.Errorf("%s not read back", key)
				}
			}
		})
	}
}

// Read (replay, dlq) and the trace scan read the same events, one with an
// empty body as stored before stop 28, and the trace's headers only.
func TestReadersReadEventsStoredWithAStatusHeader(t *testing.T) {
	for _, status := range storedStatuses {
		t.Run(status, func(t *testing.T) {
			e, c := startEmbedded(t, t.TempDir(), testStreams())
			defer e.Shutdown()
			defer c.Close()
			statusStored(t, c, status, nil)
			var read []uint64
			err := Read(t.Context(), c, StreamWebhooks, Range{}, func(m StoredMsg, _ uint64) error {
				read = append(read, m.Seq)
				return nil
			})
			if err != nil || !slices.Equal(read, []uint64{1, 2, 3}) {
				t.Errorf("Read: %v, seqs %v; want 1 2 3", err, read)
			}
			for _, headersOnly := range []bool{false, true} {
				var scanned []uint64
				_, err := scanStream(t.Context(), c, StreamWebhooks, "webhooks.>", headersOnly, func(m StoredMsg) {
					scanned = append(scanned, m.Seq)
				})
				if err != nil || !slices.Equal(scanned, []uint64{1, 2, 3}) {
					t.Errorf("scan (headers only %v): %v, seqs %v; want 1 2 3", headersOnly, err, scanned)
				}
			}
		})
	}
}
