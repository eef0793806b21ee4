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
	f.Add(int64(1764561600), int64(123456789), int32(0), "grants:default:evt:1", false, "", "", int64(0), "", uint64(0))
	f.Add(int64(1764561600), int64(0), int32(-12600), "a\x00b<>&\u2028\xff", true, "host-1/42", "k\"\\", int64(1764561640), "grants.p.G-1.b\x00grants.p.G-1.a\x00<\xff>", uint64(1<<63))
	f.Add(int64(-62135596800), int64(0), int32(0), "", true, "o", "k", int64(253402300800), "x", uint64(1)) // year 1, year 10000
	f.Add(int64(0), int64(0), int32(24*3600), "x", false, "", "", int64(0), "", uint64(0))                  // zone RFC 3339 cannot write
	f.Fuzz(func(t *testing.T, atSec, atNsec int64, zone int32, keys string, lease bool, owner, key string, untilSec int64, grants string, seq uint64) {
		loc := time.FixedZone("z", int(zone))
		m := consumer.Mark{At: time.Unix(atSec, atNsec%1e9).In(loc)}
		if keys != "" {
			// "" is no key; "\x00" alone is one empty key.
			m.Keys = strings.Split(keys, "\x00")
		}
		if lease {
			// A redeliver lease from seq's low bit, which keeps the corpus's
			// arguments as they are.
			m.Lease = &consumer.Lease{Owner: owner, Key: key, Until: time.Unix(untilSec, 0).UTC(), Redeliver: seq&1 == 1}
		}
		if grants != "" {
			// Sequences differ per subject; a repeated subject keeps the last.
			m.Grants = map[string]uint64{}
			for i, g := range strings.Split(grants, "\x00") {
				m.Grants[g] = seq + uint64(i)
			}
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
