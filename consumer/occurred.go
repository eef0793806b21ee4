package consumer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidOccurredAt is wrapped by every error ParseOccurredAt returns.
var ErrInvalidOccurredAt = errors.New("invalid occurred_at")

// Bounds of an occurred_at instant. Before the Unix epoch is a negative
// Unix time; after 9999 cannot be written in RFC 3339, so a watermark
// holding it could not be stored and read back.
const (
	occurredMinUnix = 0
	occurredMaxUnix = 253402300799 // 9999-12-31T23:59:59Z
)

// occurredQuoteMax bounds how much of a bad value an error quotes: the
// value comes from outside and ends up in logs and dead-letter reasons.
const occurredQuoteMax = 64

// ParseOccurredAt parses the raw occurred_at value the gateway extracted
// from a json: or header: source (a JSON number arrives as its literal
// text, a JSON string as its value) and returns the instant in UTC.
//
// Accepted, after trimming surrounding ASCII whitespace:
//
//   - RFC 3339: 2026-11-30T10:00:00Z, 2026-11-30T10:00:00.123456789+01:00.
//     Also accepted, as RFC 3339 section 5.6 and ISO 8601 allow: a lower
//     case t or z, a space instead of T (2026-11-30 10:00:00Z, what SQL
//     and Python's str() print), a comma before the fraction, and an
//     offset without its colon (+0100, what PHP's DATE_ISO8601 prints).
//   - ISO 8601 without a zone: 2026-11-30T10:00:00[.fff], read as UTC
//     whatever the host's zone (time.Local is never consulted). Also in
//     ISO 8601's basic format, without separators: 20261130T100000[.fff],
//     20261130T1000, with or without a zone (Z, +0100); review BH found
//     such events dead-lettered, and never re-feedable.
//   - Unix seconds as a JSON number or a string of one: 1732960800,
//     1732960800.25, 1.7329608e9. The decimal text is read exactly, never
//     through a float64, so 1732960800.123456789 keeps every nanosecond;
//     digits past the nanosecond are dropped (truncated, as time.Parse
//     does with long fractions).
//
// A time may leave out its seconds (10:01, 10:01Z, 10:01+01:00: ISO 8601
// allows it, and Java prints a time on the whole minute so), read as :00.
// The fraction may have any number of digits. A leap second (:60) is read as
// the last nanosecond of :59. Not accepted: a date alone, a fraction of a
// minute, hour 24, week or ordinal dates,
// numbers with a + sign, hex, NaN or Infinity. The instant must lie from
// 1970-01-01T00:00:00Z (negative Unix times are errors, whatever the form)
// through the end of year 9999; a number past that with 13, 16 or 19
// integer digits gets a hint that it looks like milli-, micro- or
// nanoseconds, which are not guessed at.
//
// Every error wraps ErrInvalidOccurredAt, says what is wrong and quotes the
// value, truncated to 64 bytes. ParseOccurredAt is a pure function, safe
// for concurrent use.
func ParseOccurredAt(raw string) (time.Time, error) {
	s := strings.Trim(raw, " \t\r\n")
	var (
		t   time.Time
		err error
	)
	basic := occurredBasic(s)
	switch {
	case s == "":
		return time.Time{}, occurredError(raw, "empty")
	case occurredLooksLikeDate(s):
		t, err = parseOccurredDate(s)
	case basic != "":
		t, err = parseOccurredDate(basic)
	case s[0] == '-' || (s[0] >= '0' && s[0] <= '9'):
		t, err = parseOccurredUnix(s)
	default:
		err = errors.New("want RFC 3339, ISO 8601 date-time or Unix seconds")
	}
	if err != nil {
		return time.Time{}, occurredError(raw, err.Error())
	}
	if sec := t.Unix(); sec < occurredMinUnix {
		return time.Time{}, occurredError(raw, "before 1970-01-01T00:00:00Z (a negative Unix time)")
	} else if sec > occurredMaxUnix {
		return time.Time{}, occurredError(raw, "beyond year 9999")
	}
	return t, nil
}

func occurredError(raw, reason string) error {
	q := raw
	if len(q) > occurredQuoteMax {
		q = q[:occurredQuoteMax]
	}
	quoted := strconv.Quote(q)
	if len(q) < len(raw) {
		quoted += fmt.Sprintf("... (%d bytes)", len(raw))
	}
	return fmt.Errorf("%w %s: %s", ErrInvalidOccurredAt, quoted, reason)
}

// occurredLooksLikeDate reports whether s starts like YYYY-: four digits and
// a dash, which no Unix-seconds form can.
func occurredLooksLikeDate(s string) bool {
	if len(s) < 5 || s[4] != '-' {
		return false
	}
	for i := range 4 {
		if !occurredIsDigit(s[i]) {
			return false
		}
	}
	return true
}

func occurredIsDigit(c byte) bool { return c >= '0' && c <= '9' }

// occurredBasic returns s, an ISO 8601 date-time in the basic format
// (YYYYMMDDThhmm[ss] and what may follow the seconds: a fraction, a
// zone), written in the extended one that parseOccurredDate reads, or ""
// when s is not in the basic format. Eight digits and a T: no Unix-seconds
// form looks so.
func occurredBasic(s string) string {
	if len(s) < 13 || (s[8] != 'T' && s[8] != 't') {
		return ""
	}
	for i := range 8 {
		if !occurredIsDigit(s[i]) {
			return ""
		}
	}
	n := 0
	for 9+n < len(s) && occurredIsDigit(s[9+n]) {
		n++
	}
	if n != 4 && n != 6 {
		return ""
	}
	ext := s[:4] + "-" + s[4:6] + "-" + s[6:8] + "T" + s[9:11] + ":" + s[11:13]
	if n == 6 {
		ext += ":" + s[13:15]
	}
	return ext + s[9+n:]
}

// occurredScanner reads fixed-width fields of a date-time left to right.
type occurredScanner struct {
	s   string
	pos int
}

// digits reads exactly n digits as a number.
func (sc *occurredScanner) digits(n int, what string) (int, error) {
	if sc.pos+n > len(sc.s) {
		return 0, fmt.Errorf("want %d-digit %s at byte %d, input ends", n, what, sc.pos)
	}
	v := 0
	for i := range n {
		c := sc.s[sc.pos+i]
		if !occurredIsDigit(c) {
			return 0, fmt.Errorf("want %d-digit %s at byte %d, found %q", n, what, sc.pos, c)
		}
		v = v*10 + int(c-'0')
	}
	sc.pos += n
	return v, nil
}

// sep consumes one byte out of set.
func (sc *occurredScanner) sep(set, want string) error {
	if sc.pos >= len(sc.s) {
		return fmt.Errorf("want %s at byte %d, input ends", want, sc.pos)
	}
	if c := sc.s[sc.pos]; strings.IndexByte(set, c) < 0 {
		return fmt.Errorf("want %s at byte %d, found %q", want, sc.pos, c)
	}
	sc.pos++
	return nil
}

// parseOccurredDate parses YYYY-MM-DD(T|t| )hh:mm:ss[(.|,)fraction][zone]
// with zone Z, z, ±hh:mm or ±hhmm; no zone means UTC.
func parseOccurredDate(s string) (time.Time, error) {
	sc := &occurredScanner{s: s}
	var f [6]int
	fields := [6]struct {
		width int
		name  string
		want  string // what the separator before the field must be
		set   string // the bytes it may be
	}{
		{4, "year", "", ""},
		{2, "month", "'-'", "-"},
		{2, "day", "'-'", "-"},
		{2, "hour", "'T' or a space", "Tt "},
		{2, "minute", "':'", ":"},
		{2, "second", "':'", ":"},
	}
	for i, fd := range fields {
		if fd.set != "" {
			if err := sc.sep(fd.set, fd.want); err != nil {
				switch {
				case i == 3 && sc.pos == len(s):
					return time.Time{}, errors.New("a date alone has no time of day: want YYYY-MM-DDThh:mm:ss")
				case i == 5 && (sc.pos == len(s) || strings.IndexByte("Zz+-", s[sc.pos]) >= 0):
					// hh:mm, as ISO 8601 allows and Java's LocalDateTime
					// and OffsetDateTime print a time on the whole minute
					// (review AB: one event a minute was dead-lettered).
					// No fraction of a minute.
				case i == 5:
					return time.Time{}, errors.New("a time without seconds takes no fraction: want hh:mm or hh:mm:ss[.fff]")
				default:
					return time.Time{}, err
				}
				break
			}
		}
		v, err := sc.digits(fd.width, fd.name)
		if err != nil {
			return time.Time{}, err
		}
		f[i] = v
	}
	year, month, day, hour, minute, second := f[0], f[1], f[2], f[3], f[4], f[5]
	switch {
	case month < 1 || month > 12:
		return time.Time{}, fmt.Errorf("month %02d out of range", month)
	case day < 1 || day > occurredDaysIn(time.Month(month), year):
		return time.Time{}, fmt.Errorf("day %02d out of range for %04d-%02d", day, year, month)
	case hour > 23:
		return time.Time{}, fmt.Errorf("hour %02d out of range", hour)
	case minute > 59:
		return time.Time{}, fmt.Errorf("minute %02d out of range", minute)
	case second > 60:
		return time.Time{}, fmt.Errorf("second %02d out of range", second)
	}

	nsec := 0
	if sc.pos < len(s) && (s[sc.pos] == '.' || s[sc.pos] == ',') {
		sc.pos++
		start := sc.pos
		for sc.pos < len(s) && occurredIsDigit(s[sc.pos]) {
			if n := sc.pos - start; n < 9 {
				nsec = nsec*10 + int(s[sc.pos]-'0')
			}
			sc.pos++
		}
		n := sc.pos - start
		if n == 0 {
			return time.Time{}, fmt.Errorf("want digits after the decimal separator at byte %d", start)
		}
		for ; n < 9; n++ {
			nsec *= 10
		}
	}

	offset := 0
	if sc.pos < len(s) {
		switch c := s[sc.pos]; c {
		case 'Z', 'z':
			sc.pos++
		case '+', '-':
			sc.pos++
			oh, err := sc.digits(2, "offset hour")
			if err != nil {
				return time.Time{}, err
			}
			if sc.pos < len(s) && s[sc.pos] == ':' {
				sc.pos++
			}
			om, err := sc.digits(2, "offset minute")
			if err != nil {
				return time.Time{}, err
			}
			if oh > 23 || om > 59 {
				return time.Time{}, fmt.Errorf("offset %c%02d:%02d out of range", c, oh, om)
			}
			offset = (oh*60 + om) * 60
			if c == '-' {
				offset = -offset
			}
		default:
			return time.Time{}, fmt.Errorf("want a fraction, Z or an offset like +01:00 at byte %d, found %q", sc.pos, c)
		}
	}
	if sc.pos != len(s) {
		return time.Time{}, fmt.Errorf("unexpected %q at byte %d after the zone", s[sc.pos], sc.pos)
	}
	if second == 60 {
		// A leap second (RFC 3339 allows :60): UTC as Go and Unix time
		// count it has no instant of its own. Read all of it as the last
		// nanosecond of :59, so it stays after everything before it and
		// before everything after; events within it share that instant
		// (each applies, told apart by key).
		second, nsec = 59, int(time.Second-1)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, nsec, time.UTC)
	return t.Add(-time.Duration(offset) * time.Second), nil
}

func occurredDaysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// occurredMaxExp bounds the exponent of a Unix-seconds number while it is
// read; anything near it is far out of range (or zero) anyway, and the
// bound keeps the arithmetic below from overflowing.
const occurredMaxExp = 1 << 20

// parseOccurredUnix reads Unix seconds written as a JSON number
// (-?digits[.digits][(e|E)[+|-]digits]; leading zeros allowed, as in a
// string of digits) exactly: the value is digits × 10^exp, and the digits
// are split at the decimal point into whole seconds and nanoseconds
// without ever going through a float.
func parseOccurredUnix(s string) (time.Time, error) {
	i := 0
	neg := s[0] == '-'
	if neg {
		i++
	}
	intStart := i
	for i < len(s) && occurredIsDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	if intPart == "" {
		return time.Time{}, errors.New("want digits after '-'")
	}
	var fracPart string
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && occurredIsDigit(s[i]) {
			i++
		}
		fracPart = s[start:i]
		if fracPart == "" {
			return time.Time{}, fmt.Errorf("want digits after the decimal point at byte %d", start)
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		start := i
		for i < len(s) && occurredIsDigit(s[i]) {
			if exp < occurredMaxExp {
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if i == start {
			return time.Time{}, fmt.Errorf("want digits in the exponent at byte %d", start)
		}
		exp = min(exp, occurredMaxExp)
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return time.Time{}, fmt.Errorf("unexpected %q at byte %d: want Unix seconds (1732960800, 1732960800.25) or a date-time (2026-11-30T10:00:00Z)", s[i], i)
	}

	// value = 0.<digits> × 10^point once leading zeros are gone.
	digits := intPart + fracPart
	point := len(intPart) + exp
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	digits = strings.TrimRight(trimmed, "0")
	if digits == "" {
		return time.Unix(0, 0).UTC(), nil // zero, -0 included
	}
	if neg {
		return time.Time{}, errors.New("negative Unix time")
	}
	if point > 12 { // at least 10^12 seconds, past year 9999
		hint := ""
		switch point {
		case 13:
			hint = " (13 integer digits: Unix milliseconds? occurred_at takes seconds)"
		case 16:
			hint = " (16 integer digits: Unix microseconds? occurred_at takes seconds)"
		case 19:
			hint = " (19 integer digits: Unix nanoseconds? occurred_at takes seconds)"
		}
		return time.Time{}, errors.New("beyond year 9999" + hint)
	}

	// digit k of digits (0-based) has weight 10^(point-1-k) seconds.
	var sec, nsec int64
	for k := 0; k < point; k++ {
		sec *= 10
		if k < len(digits) {
			sec += int64(digits[k] - '0')
		}
	}
	for e := 1; e <= 9; e++ { // weight 10^-e: the e-th digit after the point
		nsec *= 10
		if k := point - 1 + e; k >= 0 && k < len(digits) {
			nsec += int64(digits[k] - '0')
		}
	}
	return time.Unix(sec, nsec).UTC(), nil
}
