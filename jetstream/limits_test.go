package jetstream_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
	"github.com/hookgate/hookgate/event"
	"github.com/hookgate/hookgate/jetstream"
	"github.com/hookgate/hookgate/jetstream/jstest"
)

// event.MaxKey and event.MaxSubject are exactly the longest key and GRANTS
// subject the server takes: one byte more closes the connection. Shorter
// bounds would move the watermarks and GRANTS subjects of events that
// worked before them (an upgrade would re-apply or misorder such events);
// longer ones would let one event close the consumer's connection.
func TestSubjectAndKeyBoundsAreExact(t *testing.T) {
	keyWorks := func(n int) bool {
		env := jstest.Start(t, "")
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		key := "p.a." + strings.Repeat("x", n-4)
		rev, err := env.Marks.Put(ctx, key, consumer.Mark{At: time.Now(), Keys: []string{"p:a:evt:1"}}, 0)
		if err != nil {
			return false
		}
		if m, r, err := env.Marks.Get(ctx, key); err != nil || r != rev || m.At.IsZero() {
			return false
		}
		if _, err := env.Marks.Put(ctx, key, consumer.Mark{At: time.Now()}, rev); err != nil {
			return false
		}
		return env.Conn.JS.Conn().IsConnected()
	}
	if !keyWorks(event.MaxKey) {
		t.Errorf("a WATERMARKS key of event.MaxKey = %d bytes does not work", event.MaxKey)
	}
	if keyWorks(event.MaxKey + 1) {
		t.Errorf("a WATERMARKS key of %d bytes works: event.MaxKey is too small", event.MaxKey+1)
	}

	// The bound assumes the largest message: a 5-digit header block and an
	// 8-digit size. This server takes 2 MiB messages, 7 digits: one more
	// byte of subject fits here, two do not.
	subjectWorks := func(n int) bool {
		env := jstest.Start(t, "")
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		h := http.Header{}
		h.Set(event.HeaderKey, "p:a:evt:1")
		h.Set(event.HeaderSubject, strings.Repeat("s", 10_000)) // header block of 5 digits
		body := make([]byte, 1_500_000)                         // message size of 7 digits
		_, err := jetstream.NewEffects(env.Conn).PublishGrant(ctx, "grants."+strings.Repeat("x", n-7), "p:a:evt:1", h, body)
		return err == nil && env.Conn.JS.Conn().IsConnected()
	}
	if !subjectWorks(event.MaxSubject + 1) {
		t.Errorf("a GRANTS subject of %d bytes does not work with a 7-digit message size: event.MaxSubject is too large", event.MaxSubject+1)
	}
	if subjectWorks(event.MaxSubject + 2) {
		t.Errorf("a GRANTS subject of %d bytes works with a 7-digit message size: event.MaxSubject is too small", event.MaxSubject+2)
	}
}
