package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// ParseDuration reads a duration the way the config file writes them: any
// string time.ParseDuration accepts ("90s", "2m", "96h", "1h30m"), plus a
// leading whole number of days ("30d", "1d12h"), since retention periods are
// thought of in days and Go has no day unit. A day is always 24h: the
// durations here are intervals, not calendar dates. A bare number other than
// "0" is an error, because "30" could mean seconds or minutes.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	neg := false
	rest := s
	if strings.HasPrefix(rest, "-") {
		neg, rest = true, rest[1:]
	} else {
		rest = strings.TrimPrefix(rest, "+")
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(rest) || rest[i] != 'd' {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, errBadDuration
		}
		return d, nil
	}
	const maxDays = math.MaxInt64 / int64(24*time.Hour)
	var days int64
	for _, c := range rest[:i] {
		days = days*10 + int64(c-'0')
		if days > maxDays {
			return 0, errBadDuration
		}
	}
	d := time.Duration(days) * 24 * time.Hour
	if tail := rest[i+1:]; tail != "" {
		if tail[0] == '-' || tail[0] == '+' {
			return 0, errBadDuration
		}
		t, err := time.ParseDuration(tail)
		if err != nil || t > math.MaxInt64-d {
			return 0, errBadDuration
		}
		d += t
	}
	if neg {
		d = -d
	}
	return d, nil
}

var errBadDuration = errors.New("want a duration like 30s, 5m, 96h or 30d")

// Byte-size units. KB, MB, GB and TB are decimal (SI: 1 GB = 10^9 bytes), as
// disk vendors and the SI prefixes use them; KiB, MiB, GiB and TiB are the
// binary ones (1 GiB = 2^30 bytes). Units are case-insensitive.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// ParseBytes reads a size: a plain integer of bytes ("1048576") or a number
// with a unit ("512MB", "1GiB", "1.5GB"). KB/MB/GB/TB are powers of 1000 and
// KiB/MiB/GiB/TiB powers of 1024. The result must be a whole number of bytes
// that fits in an int64. Negative sizes parse, so that Validate can report
// them against their key.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, int64(1)
	lower := strings.ToLower(s)
	for _, u := range byteUnits {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	neg := strings.HasPrefix(num, "-")
	num = strings.TrimPrefix(strings.TrimPrefix(num, "-"), "+")
	whole, frac, _ := strings.Cut(num, ".")
	if !allDigits(whole) || (frac != "" && !allDigits(frac)) || strings.HasSuffix(num, ".") ||
		len(whole)+len(frac) > 40 {
		return 0, errBadBytes
	}
	// n = whole.frac * mult, exactly: (whole*10^len(frac) + frac) * mult / 10^len(frac).
	n, _ := new(big.Int).SetString(whole+frac, 10)
	n.Mul(n, big.NewInt(mult))
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q, m := new(big.Int).QuoRem(n, scale, new(big.Int))
	if m.Sign() != 0 {
		return 0, fmt.Errorf("%w: not a whole number of bytes", errBadBytes)
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("%w: too large", errBadBytes)
	}
	if neg {
		return -q.Int64(), nil
	}
	return q.Int64(), nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var errBadBytes = errors.New("want a size like 1048576, 512MB or 1GiB")

// formatBytes writes n in the largest binary unit that divides it, for
// messages.
func formatBytes(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.m == 0 {
			return fmt.Sprintf("%d %s", n/u.m, u.s)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
