package gateway

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// canonicalVector is one line of testdata/canonical/vectors.jsonl, written
// by testdata/canonical/gen.py from Python's json module.
type canonicalVector struct {
	Name  string `json:"name"`
	Input string `json:"input"` // base64 of the body
	Want  string `json:"want"`  // Python's canonical form, when accepted
	Error string `json:"error"` // substring of our error, when rejected
}

func loadCanonicalVectors(t testing.TB) []canonicalVector {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "canonical", "vectors.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []canonicalVector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v canonicalVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("vectors.jsonl line %d: %v", len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("only %d vectors; regenerate with testdata/canonical/gen.py", len(out))
	}
	return out
}

// TestCanonicalPythonVectors is the compatibility promise: a team moving
// from the Python reference gate keeps its keys.
func TestCanonicalPythonVectors(t *testing.T) {
	for _, tc := range loadCanonicalVectors(t) {
		t.Run(tc.Name, func(t *testing.T) {
			body, err := base64.StdEncoding.DecodeString(tc.Input)
			if err != nil {
				t.Fatal(err)
			}
			v, err := ParseJSON(body)
			if tc.Error != "" {
				if err == nil {
					t.Fatalf("ParseJSON accepted a body Python (with the contract's limits) rejects; canonical %s", Canonical(v))
				}
				if !errors.Is(err, ErrBadJSON) {
					t.Errorf("error %v does not wrap ErrBadJSON", err)
				}
				if !strings.Contains(err.Error(), tc.Error) {
					t.Errorf("error %q does not say %q", err, tc.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseJSON: %v", err)
			}
			if got := string(Canonical(v)); got != tc.Want {
				t.Errorf("Canonical mismatch\n got %s\nwant %s", truncateForLog(got), truncateForLog(tc.Want))
			}
		})
	}
}

func truncateForLog(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func TestCanonicalIdempotent(t *testing.T) {
	for _, tc := range loadCanonicalVectors(t) {
		if tc.Error != "" {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			once := mustCanonical(t, []byte(tc.Want))
			if once != tc.Want {
				t.Errorf("canonical form is not a fixed point\n got %s\nwant %s", truncateForLog(once), truncateForLog(tc.Want))
			}
		})
	}
}

func mustCanonical(t testing.TB, body []byte) string {
	t.Helper()
	v, err := ParseJSON(body)
	if err != nil {
		t.Fatalf("ParseJSON(%q): %v", truncateForLog(string(body)), err)
	}
	return string(Canonical(v))
}

func TestCanonicalPythonFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{0.1, "0.1"},
		{1e21, "1e+21"},
		{1e-7, "1e-07"},
		{1.5e-7, "1.5e-07"},
		{1e16, "1e+16"},
		{1e15, "1000000000000000.0"},
		{9999999999999998, "9999999999999998.0"},
		{1e-4, "0.0001"},
		{1e-5, "1e-05"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{123456789012345680, "1.2345678901234568e+17"},
		{1e100, "1e+100"},
		{-2.5e-100, "-2.5e-100"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := string(appendPythonFloat(nil, tc.in)); got != tc.want {
				t.Errorf("appendPythonFloat(%v) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestCanonicalDeepAndWide checks hostile shapes stay bounded and exact:
// the depth limit holds far past it without a stack blow-up, and a wide
// flat document is accepted.
func TestCanonicalDeepAndWide(t *testing.T) {
	t.Run("very deep", func(t *testing.T) {
		body := bytes.Repeat([]byte("["), 1_000_000)
		_, err := ParseJSON(body)
		var je *JSONError
		if !errors.As(err, &je) || je.Offset != MaxJSONDepth || !strings.Contains(je.Reason, "nesting") {
			t.Fatalf("err = %v, want nesting error at byte %d", err, MaxJSONDepth)
		}
	})
	t.Run("wide", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("[")
		for i := range 100_000 {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"k":` + strconv.Itoa(i) + `}`)
		}
		b.WriteString("]")
		got := mustCanonical(t, []byte(b.String()))
		if got != b.String() {
			t.Error("canonical form of an already canonical wide array changed")
		}
	})
}

// FuzzCanonical checks, for any input, that ParseJSON never panics and
// that whatever it accepts has an ASCII canonical form that re-parses to
// the same canonical form.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		`{"b":[1,2.5,-0,-0.0,1e21,"\u00e9\ud83d\ude00\ud800"],"a":{"a":null,"a":true}}`,
		`"\u007f\/\b"`, `1E400`, `[[[[]]]]`, "\xef\xbb\xbf{}", `{"a":1,"a":2}`, `123456789012345678901234567890`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := ParseJSON(body)
		if err != nil {
			if !errors.Is(err, ErrBadJSON) {
				t.Fatalf("error %v does not wrap ErrBadJSON", err)
			}
			return
		}
		c := Canonical(v)
		for i, b := range c {
			if b < 0x20 || b > 0x7E {
				t.Fatalf("canonical output has byte 0x%02x at %d: %q", b, i, c)
			}
		}
		v2, err := ParseJSON(c)
		if err != nil {
			t.Fatalf("canonical output %q does not re-parse: %v", c, err)
		}
		if c2 := Canonical(v2); !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent:\n%q\n%q", c, c2)
		}
		if !json.Valid(c) {
			t.Fatalf("encoding/json rejects canonical output %q", c)
		}
	})
}
