package jetstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/consumer"
)

func FuzzMarkJSON(f *testing.F) {
	f.Add(int64(1764561600), int64(123456789), int32(0), "grants:default:evt:1", false, "", "", int64(0))
	f.Add(int64(1764561600), int64(0), int32(-12600), "a\x00b<>&\u2028\xff", true, "host-1/42", "k\"\\", int64(1764561640))
	f.Add(int64(-62135596800), int64(0), int32(0), "", true, "o", "k", int64(253402300800)) // year 1, year 10000
	f.Add(int64(0), int64(0), int32(24*3600), "x", false, "", "", int64(0))                 // zone RFC 3339 cannot write
	f.Fuzz(func(t *testing.T, atSec, atNsec int64, zone int32, keys string, lease bool, owner, key string, untilSec int64) {
		loc := time.FixedZone("z", int(zone))
		m := consumer.Mark{At: time.Unix(atSec, atNsec%1e9).In(loc)}
		if keys != "" {
			// "" is no key; "\x00" alone is one empty key.
			m.Keys = strings.Split(keys, "\x00")
		}
		if lease {
			m.Lease = &consumer.Lease{Owner: owner, Key: key, Until: time.Unix(untilSec, 0).UTC()}
		}
		want, wantErr := json.Marshal(m)
		got, err := appendMark([]byte("prefix"), m)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("err %v, encoding/json %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("appendMark\n got %s\nwant prefix%s", got, want)
		}
	})
}
