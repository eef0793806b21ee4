package event

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func FuzzAuditRecordJSON(f *testing.F) {
	f.Add(int64(1764561600), int64(123456789), "accepted", "grants", "default", "grants:default:evt:msg_1", uint64(1), 200, "", "gateway", 0)
	f.Add(int64(0), int64(0), "rejected", "p", "a\x00\x1f\"\\<>&", "k\u2028\u2029\xff\xfe", uint64(1<<63), -1, "bad\b\f\n\r\t é 𝄞", "operator", 1<<30)
	f.Add(int64(253402300800), int64(0), "", "", "", "", uint64(0), 0, "", "", 0) // year 10000
	f.Fuzz(func(t *testing.T, sec, nsec int64, decision, provider, account, key string, seq uint64, status int, reason, actor string, suppressed int) {
		r := AuditRecord{
			Time: time.Unix(sec, nsec%1e9).UTC(), Decision: decision, Provider: provider, Account: account,
			Key: key, Seq: seq, Status: status, Reason: reason, Actor: actor, Suppressed: suppressed,
		}
		want, wantErr := json.Marshal(r)
		got, err := r.AppendJSON(nil)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("err %v, encoding/json %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
		}
	})
}

func TestAuditRecordJSONInAnotherZone(t *testing.T) {
	// Records are written in UTC, but AppendJSON must match encoding/json
	// for any zone it is given.
	r := AuditRecord{Time: time.Date(2026, 12, 1, 4, 5, 6, 7, time.FixedZone("x", -(3*3600+30*60))), Key: "k"}
	want, _ := json.Marshal(r)
	got, err := r.AppendJSON(nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got %s %v, want %s", got, err, want)
	}
}

func TestAuditRecordJSONZoneRFC3339CannotWrite(t *testing.T) {
	r := AuditRecord{Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.FixedZone("x", 24*3600)), Key: "k"}
	if _, wantErr := json.Marshal(r); wantErr == nil {
		t.Fatal("encoding/json accepted a 24 h zone offset; this test needs another case")
	}
	if b, err := r.AppendJSON([]byte("x")); err == nil {
		t.Fatalf("AppendJSON wrote %s, want encoding/json's error", b)
	}
}
