package gateway

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// parseJSONFloat's long path against strconv on the same values written
// short: a literal padded with zeros that its exponent offsets (so it is
// over 700 bytes) must read as the short one does, and a literal with more
// than 780 significant digits must round as its first 780 and a sticky
// digit do (review AD: ParseFloat misread such literals).
func TestParseJSONFloatLongLiterals(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shorts := []string{"1", "0.1", "5e-324", "2.4703282292062328e-324", "1.7976931348623157e308",
		"1.7976931348623158e308", "9007199254740993", "0.3", "123456789012345678901234567890"}
	for range 300 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		shorts = append(shorts, strconv.FormatFloat(math.Abs(f), 'e', -1, 64))
	}
	for _, short := range shorts {
		want, err := strconv.ParseFloat(short, 64)
		if err != nil && !math.IsInf(want, 0) && want != 0 {
			t.Fatal(err)
		}
		// digits × 10^exp10, as the shortest repr of want writes it.
		mant, e, _ := strings.Cut(strconv.FormatFloat(want, 'e', -1, 64), "e")
		digits := strings.Replace(mant, ".", "", 1)
		exp, _ := strconv.Atoi(e)
		exp10 := exp - (len(digits) - 1)
		for _, pad := range []int{701, 800, 801, 1000, 5000, 20000} {
			zeros := strings.Repeat("0", pad)
			for _, long := range []string{
				digits + zeros + "e" + strconv.Itoa(exp10-pad),                    // zeros after the digits
				"0." + zeros + digits + "e" + strconv.Itoa(exp10+pad+len(digits)), // zeros before
				"-" + digits + zeros + "e" + strconv.Itoa(exp10-pad),
			} {
				got := parseJSONFloat(long)
				w := want
				if strings.HasPrefix(long, "-") {
					w = -want
				}
				if got != w && !(math.IsInf(got, 0) && math.IsInf(w, 0)) {
					t.Fatalf("parseJSONFloat(%.40s... %d bytes) = %v, want %v (%s)", long, len(long), got, w, short)
				}
			}
		}
	}
	// Beyond the kept digits only the sticky digit counts: the halfway
	// point between 1 and the next float64 rounds to even (1) exactly,
	// and up with anything after it however far out.
	half := "1.00000000000000011102230246251565404236316680908203125"
	if got := parseJSONFloat(half + strings.Repeat("0", 900)); got != 1 {
		t.Errorf("exact halfway: %v, want 1", got)
	}
	if got := parseJSONFloat(half + strings.Repeat("0", 900) + "1"); got != math.Nextafter(1, 2) {
		t.Errorf("just above halfway: %v, want %v", got, math.Nextafter(1, 2))
	}
	for _, tc := range []struct {
		lit  string
		want float64
	}{
		{"1e" + strings.Repeat("9", 30) + strings.Repeat(" ", 0), math.Inf(1)},
		{"1" + strings.Repeat("0", 800) + "e-" + strings.Repeat("9", 30), 0},
		{"0." + strings.Repeat("0", 800), 0},
		{"-0." + strings.Repeat("0", 800) + "e5", math.Copysign(0, -1)},
	} {
		if got := parseJSONFloat(tc.lit); got != tc.want || math.Signbit(got) != math.Signbit(tc.want) {
			t.Errorf("parseJSONFloat(%.30s...) = %v, want %v", tc.lit, got, tc.want)
		}
	}
}
