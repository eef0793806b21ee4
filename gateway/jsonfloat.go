package gateway

import (
	"math"
	"strconv"
	"strings"
)

// jsonFloatSigDigits is how many significant digits parseJSONFloat hands
// strconv.ParseFloat at most (plus one sticky digit): more than the 767
// that the exact decimal value of a point halfway between two float64s
// can have, fewer than the 800 ParseFloat keeps.
const jsonFloatSigDigits = 780

// parseJSONFloat reads a JSON number literal (the grammar already
// checked) as Python's float() does: correctly rounded whatever its
// length, ±Inf past the float64 range. strconv.ParseFloat keeps at most
// 800 digits, placing the decimal point by that count, and stops reading
// an exponent at 10000: a literal with more integer digits, or zeros that
// a long exponent offsets, was misread (review AD: "1" with 800 zeros and
// "e-800" read as 0.1, so two different bodies shared a digest key, and
// 1e310 written with 1000 zeros and "e-690" was accepted as finite).
func parseJSONFloat(text string) float64 {
	if len(text) <= 700 {
		// Too short for either limit to matter: at most 700 digits, and
		// no exponent they could offset by more than 700 places.
		f, _ := strconv.ParseFloat(text, 64)
		return f
	}
	s, neg := strings.CutPrefix(text, "-")
	mantEnd := strings.IndexAny(s, "eE")
	exp := 0
	if mantEnd >= 0 {
		exp = saturatedExponent(s[mantEnd+1:])
	} else {
		mantEnd = len(s)
	}
	intPart, frac, _ := strings.Cut(s[:mantEnd], ".")
	// value = digits × 10^exp10, digits without leading or trailing zeros.
	digits := strings.TrimLeft(intPart+frac, "0")
	exp10 := exp - len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp10 += len(digits) - len(trimmed)
	digits = trimmed
	var f float64
	switch mag := len(digits) + exp10; {
	case digits == "":
		f = 0
	case mag > 310: // above 1e310
		f = math.Inf(1)
	case mag < -330: // below 1e-330, half the smallest float64 and less
		f = 0
	default:
		if len(digits) > jsonFloatSigDigits {
			sticky := strings.Trim(digits[jsonFloatSigDigits:], "0") != ""
			exp10 += len(digits) - jsonFloatSigDigits
			digits = digits[:jsonFloatSigDigits]
			if sticky {
				// Something below the kept digits: never exactly a
				// halfway point, so it still rounds the right way.
				digits += "1"
				exp10--
			}
		}
		f, _ = strconv.ParseFloat(digits+"e"+strconv.Itoa(exp10), 64)
	}
	if neg {
		f = -f
	}
	return f
}

// saturatedExponent reads an exponent's digits (after an optional sign)
// as an int, held at ±1e9 past that: far beyond any float64, and far from
// overflowing int with a body's worth of digits added.
func saturatedExponent(s string) int {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if n < 1e9 {
			n = n*10 + int(s[i]-'0')
		}
	}
	n = min(n, 1e9)
	if neg {
		return -n
	}
	return n
}
