package consumer

import (
	"errors"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the child below needs its zone on a machine without zoneinfo
)

func TestParseOccurredAt(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	base := utc(2026, 11, 30, 10, 0, 0, 0)
	tests := []struct {
		raw  string
		want time.Time
	}{
		// RFC 3339.
		{"2026-11-30T10:00:00Z", base},
		{"2026-11-30T10:00:00z", base},
		{"2026-11-30t10:00:00Z", base},
		{"2026-11-30 10:00:00Z", base},
		{"2026-11-30T11:00:00+01:00", base},
		{"2026-11-30T05:30:00-04:30", base},
		{"2026-11-30T10:00:00-00:00", base},
		{"2026-11-30T11:00:00+0100", base},
		{"2026-12-01T09:59:00+23:59", base},
		{"2026-11-30T10:00:00.5Z", base.Add(500 * time.Millisecond)},
		{"2026-11-30T10:00:00.123456789Z", base.Add(123456789)},
		{"2026-11-30T10:00:00.1234567899Z", base.Add(123456789)}, // past ns: truncated
		{"2026-11-30T10:00:00,25Z", base.Add(250 * time.Millisecond)},
		{"2026-11-30T11:00:00.000001+01:00", base.Add(time.Microsecond)},
		{"2028-02-29T00:00:00Z", utc(2028, 2, 29, 0, 0, 0, 0)},
		{"2000-02-29T00:00:00Z", utc(2000, 2, 29, 0, 0, 0, 0)},
		{"1970-01-01T00:00:00Z", time.Unix(0, 0).UTC()},
		{"9999-12-31T23:59:59.999999999Z", utc(9999, 12, 31, 23, 59, 59, 999999999)},
		{" 2026-11-30T10:00:00Z\n", base},
		// ISO 8601 without a zone: UTC.
		{"2026-11-30T10:00:00", base},
		{"2026-11-30 10:00:00", base},
		{"2026-11-30T10:00:00.000000001", base.Add(1)},
		// Unix seconds.
		{"1732960800", time.Unix(1732960800, 0).UTC()},
		{"1732960800.25", time.Unix(1732960800, 250000000).UTC()},
		{"1732960800.123456789", time.Unix(1732960800, 123456789).UTC()},
		{"1732960800.1234567891", time.Unix(1732960800, 123456789).UTC()},
		{"1732960800.000000001", time.Unix(1732960800, 1).UTC()},
		{"1732960800.0", time.Unix(1732960800, 0).UTC()},
		{"01732960800", time.Unix(1732960800, 0).UTC()},
		{"1.7329608e9", time.Unix(1732960800, 0).UTC()},
		{"1.7329608E+9", time.Unix(1732960800, 0).UTC()},
		{"17329608000e-1", time.Unix(1732960800, 0).UTC()},
		{"1732960800123456789e-9", time.Unix(1732960800, 123456789).UTC()},
		{"1.732960800123456789e9", time.Unix(1732960800, 123456789).UTC()},
		{"0.0000000017329608e18", time.Unix(1732960800, 0).UTC()},
		// Seconds left out, as ISO 8601 allows and Java prints a time on
		// the whole minute (review AB).
		{"2026-11-30T10:01", utc(2026, 11, 30, 10, 1, 0, 0)},
		{"2026-11-30T10:01Z", utc(2026, 11, 30, 10, 1, 0, 0)},
		{"2026-11-30 10:01+01:00", utc(2026, 11, 30, 9, 1, 0, 0)},
		{"2026-11-30T10:01-0130", utc(2026, 11, 30, 11, 31, 0, 0)},
		{"5e-9", time.Unix(0, 5).UTC()},
		{"5e-10", time.Unix(0, 0).UTC()},
		{"0", time.Unix(0, 0).UTC()},
		{"-0", time.Unix(0, 0).UTC()},
		{"0e999999999999999999999", time.Unix(0, 0).UTC()},
		{"253402300799.999999999", utc(9999, 12, 31, 23, 59, 59, 999999999)},
		{"2.53402300799e11", utc(9999, 12, 31, 23, 59, 59, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := ParseOccurredAt(tt.raw)
			if err != nil {
				t.Fatalf("ParseOccurredAt(%q): %v", tt.raw, err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("ParseOccurredAt(%q) = %s, want %s", tt.raw, got.Format(time.RFC3339Nano), tt.want.Format(time.RFC3339Nano))
			}
			if got.Location() != time.UTC {
				t.Errorf("ParseOccurredAt(%q) location = %v, want UTC", tt.raw, got.Location())
			}
		})
	}
}

func TestParseOccurredAtErrors(t *testing.T) {
	long := strings.Repeat("9", 1000)
	tests := []struct {
		raw  string
		want string // in the message
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"yesterday", `"yesterday": want RFC 3339, ISO 8601 date-time or Unix seconds`},
		{"2026-11-30", "a date alone"},
		{"2026-11-30T10:00.5Z", "a time without seconds takes no fraction"},
		{"2026-11-30T10:00.5", "a time without seconds takes no fraction"},
		{"2026-11-30T10:00 Z", "a time without seconds takes no fraction"},
		{"2026-11-30T10", "want ':' at byte 13, input ends"},
		{"2026-11-30T10:00:5Z", "want 2-digit second at byte 17, found 'Z'"},
		{"2026-13-01T00:00:00Z", "month 13 out of range"},
		{"2026-00-01T00:00:00Z", "month 00 out of range"},
		{"2026-02-29T00:00:00Z", "day 29 out of range for 2026-02"},
		{"2026-04-31T00:00:00Z", "day 31 out of range"},
		{"2026-11-00T00:00:00Z", "day 00 out of range"},
		{"2026-11-30T24:00:00Z", "hour 24 out of range"},
		{"2026-11-30T10:60:00Z", "minute 60 out of range"},
		{"2026-11-30T10:00:61Z", "second 61 out of range"},
		{"2026-11-30T10:00:00.Z", "want digits after the decimal separator"},
		{"2026-11-30T10:00:00+1:00", "offset hour"},
		{"2026-11-30T10:00:00+24:00", "offset +24:00 out of range"},
		{"2026-11-30T10:00:00+01:60", "offset +01:60 out of range"},
		{"2026-11-30T10:00:00+01", "offset minute"},
		{"2026-11-30T10:00:00ZZ", `unexpected 'Z' at byte 20`},
		{"2026-11-30T10:00:00 UTC", "want a fraction, Z or an offset"},
		{"2026-11-30X10:00:00Z", "want 'T' or a space"},
		{"2026/11/30T10:00:00Z", "unexpected '/' at byte 4: want Unix seconds (1732960800, 1732960800.25) or a date-time"},
		{"1969-12-31T23:59:59Z", "before 1970"},
		{"1970-01-01T00:30:00+01:00", "before 1970"},
		{"0000-01-01T00:00:00Z", "before 1970"},
		{"9999-12-31T23:59:59-00:01", "beyond year 9999"},
		{"-1", "negative Unix time"},
		{"-0.000000000001", "negative Unix time"},
		{"-1732960800", "negative Unix time"},
		{"+1732960800", "want RFC 3339"},
		{"-", "want digits after '-'"},
		{"1732960800.", "want digits after the decimal point"},
		{".5", "want RFC 3339"},
		{"1e", "want digits in the exponent"},
		{"1e+", "want digits in the exponent"},
		{"0x10", `unexpected 'x' at byte 1`},
		{"1732960800 1", `unexpected ' '`},
		{"1,5", `unexpected ','`},
		{"NaN", "want RFC 3339"},
		{"Infinity", "want RFC 3339"},
		{"253402300800", "beyond year 9999"},
		{"1e12", "beyond year 9999"},
		{"1e999999999999999999999", "beyond year 9999"},
		{"1732960800000", "Unix milliseconds?"},
		{"1732960800000000", "Unix microseconds?"},
		{"1732960800000000000", "Unix nanoseconds?"},
		{long, `"` + long[:64] + `"... (1000 bytes): beyond year 9999`},
		{"\x00\xff", `"\x00\xff": want RFC 3339`},
	}
	for _, tt := range tests {
		name := tt.raw
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			got, err := ParseOccurredAt(tt.raw)
			if err == nil {
				t.Fatalf("ParseOccurredAt(%q) = %s, want an error", tt.raw, got.Format(time.RFC3339Nano))
			}
			if !errors.Is(err, ErrInvalidOccurredAt) {
				t.Errorf("error %q does not wrap ErrInvalidOccurredAt", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error is %d bytes long, want the value truncated: %q", len(err.Error()), err)
			}
			if !got.IsZero() {
				t.Errorf("time with an error = %v, want zero", got)
			}
		})
	}
}

// TestParseOccurredAtIgnoresLocal runs with the host zone set far from UTC:
// a zone-less value must still be read as UTC. The zone is the process's
// TZ, so the checks run in a child process of this test binary: setting
// time.Local here raced (under -race, a failure) with nats-server's
// process-stats goroutine, which reads it every second in any binary that
// links the server.
func TestParseOccurredAtIgnoresLocal(t *testing.T) {
	const childEnv = "HOOKGATE_TEST_TZ_CHILD"
	if os.Getenv(childEnv) == "" {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestParseOccurredAtIgnoresLocal$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1", "TZ=Asia/Kolkata")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestParseOccurredAtIgnoresLocal") {
			t.Fatalf("the checks in a child with TZ=Asia/Kolkata: %v\n%s", err, out)
		}
		return
	}
	if name, offset := time.Now().Zone(); offset != 5*3600+1800 {
		t.Fatalf("TZ=Asia/Kolkata gave the zone %s, offset %ds; want +05:30", name, offset)
	}

	want := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, raw := range []string{"2026-11-30T10:00:00", "2026-11-30 10:00:00", "2026-11-30T10:00:00Z", "2026-11-30T15:30:00+05:30", "1796032800"} {
		got, err := ParseOccurredAt(raw)
		if err != nil {
			t.Fatalf("ParseOccurredAt(%q): %v", raw, err)
		}
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("ParseOccurredAt(%q) = %s (%v), want %s in UTC", raw, got.Format(time.RFC3339Nano), got.Location(), want.Format(time.RFC3339Nano))
		}
	}
}

// TestParseOccurredAtUnixMatchesExact cross-checks the hand-written decimal
// reader against math/big on values a float64 would get wrong.
func TestParseOccurredAtUnixMatchesExact(t *testing.T) {
	for _, raw := range []string{
		"1732960800.123456789", "1732960800.999999999", "1732960800.000000001",
		"253402300799.999999999", "1.7329608001e9", "17329608001234567e-7",
		"0.123456789", "9.87654321e-1", "123456789.987654321",
	} {
		got, err := ParseOccurredAt(raw)
		if err != nil {
			t.Fatalf("ParseOccurredAt(%q): %v", raw, err)
		}
		if want, ok := exactUnixNanos(raw); !ok || unixNanos(got).Cmp(want) != 0 {
			t.Errorf("ParseOccurredAt(%q) = %s ns, want %s (exact: %v)", raw, unixNanos(got), want, ok)
		}
	}
}

// exactUnixNanos returns raw × 1e9, truncated toward zero, computed with
// math/big, for numbers small enough to compute that way.
func exactUnixNanos(raw string) (*big.Int, bool) {
	if len(raw) > 80 {
		return nil, false
	}
	if i := strings.IndexAny(raw, "eE"); i >= 0 {
		exp := strings.TrimLeft(raw[i+1:], "+-")
		if len(exp) > 3 {
			return nil, false // big.Rat would build 10^exp
		}
	}
	r, ok := new(big.Rat).SetString(raw)
	if !ok {
		return nil, false
	}
	r.Mul(r, new(big.Rat).SetInt64(1e9))
	return new(big.Int).Quo(r.Num(), r.Denom()), true
}

// unixNanos is t in nanoseconds since the epoch; unlike t.UnixNano it does
// not overflow after 2262.
func unixNanos(t time.Time) *big.Int {
	n := big.NewInt(t.Unix())
	n.Mul(n, big.NewInt(1e9))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

func FuzzParseOccurredAt(f *testing.F) {
	for _, s := range []string{
		"2026-11-30T10:00:00Z", "2026-11-30T10:00:00.123456789+01:00", "2026-11-30T10:00:00",
		"2026-11-30 10:00:00,5", "2026-11-30T11:00:00+0100", "1732960800", "1732960800.25",
		"1.7329608e9", "1732960800.123456789", "-0", "0e-99", "253402300799.999999999",
		"9999-12-31T23:59:59.999999999Z", "1969-12-31T23:59:59Z", "1732960800000", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := ParseOccurredAt(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidOccurredAt) {
				t.Fatalf("error %q does not wrap ErrInvalidOccurredAt", err)
			}
			if !got.IsZero() {
				t.Fatalf("ParseOccurredAt(%q) = %v with an error", raw, got)
			}
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("ParseOccurredAt(%q) location = %v, want UTC", raw, got.Location())
		}
		if got.Unix() < 0 || got.Year() > 9999 {
			t.Fatalf("ParseOccurredAt(%q) = %v, out of range", raw, got)
		}
		text := got.Format(time.RFC3339Nano)
		again, err := ParseOccurredAt(text)
		if err != nil {
			t.Fatalf("ParseOccurredAt(%q) = %s, which does not parse again: %v", raw, text, err)
		}
		if !again.Equal(got) {
			t.Fatalf("ParseOccurredAt(%q) = %s, parsed again %s", raw, text, again.Format(time.RFC3339Nano))
		}
		if std, err := time.Parse(time.RFC3339Nano, text); err != nil || !std.Equal(got) {
			t.Fatalf("time.Parse(%q) = %v, %v; want %v", text, std, err, got)
		}
		if s := strings.Trim(raw, " \t\r\n"); s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && !occurredLooksLikeDate(s) {
			if want, ok := exactUnixNanos(s); ok && unixNanos(got).Cmp(want) != 0 {
				t.Fatalf("ParseOccurredAt(%q) = %s ns, math/big says %s", raw, unixNanos(got), want)
			}
		}
	})
}
