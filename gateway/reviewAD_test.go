package gateway

// Review AD: the idempotency key's canonical JSON, differentially against
// Python 3 (testdata/reviewAD/gen.py writes testdata/reviewAD/vectors.jsonl).
//
// CONTRACT.md, "Idempotency key":
//   "The canonical payload is byte-for-byte Python's
//   json.dumps(json.loads(body.decode("utf-8")), sort_keys=True, separators=(",", ":"), ensure_ascii=True)"

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

type reviewADVector struct {
	Name  string  `json:"name"`
	Input string  `json:"input"`
	Want  *string `json:"want"`
	Why   *string `json:"why"`
	ID    *string `json:"id"`
}

func reviewADLoad(t *testing.T) []reviewADVector {
	t.Helper()
	path := filepath.Join("testdata", "reviewAD", "vectors.jsonl")
	if p := os.Getenv("REVIEWAD_VECTORS"); p != "" {
		path = p // the whole sweep: python3 testdata/reviewAD/gen.py --sweep
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []reviewADVector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v reviewADVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %d: %v", len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func reviewADShort(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%s...%s (%d bytes)", s[:40], s[len(s)-40:], len(s))
	}
	return s
}

// TestReviewADCanonicalMatchesPython feeds every generated body to
// ParseJSON+Canonical (what the dig: key hashes) and compares with Python.
func TestReviewADCanonicalMatchesPython(t *testing.T) {
	vs := reviewADLoad(t)
	fails := map[string][]string{}
	for _, tc := range vs {
		body, err := base64.StdEncoding.DecodeString(tc.Input)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ParseJSON(body)
		var msg, class string
		switch {
		case tc.Want == nil && err == nil:
			class = "accepted, Python/contract rejects"
			msg = fmt.Sprintf("%s: body %q: Go canonical %s; Python: %s", tc.Name, reviewADShort(string(body)), reviewADShort(string(Canonical(v))), *tc.Why)
		case tc.Want != nil && err != nil:
			class = "rejected, Python accepts"
			msg = fmt.Sprintf("%s: body %q: Go error %v; Python %s", tc.Name, reviewADShort(string(body)), err, reviewADShort(*tc.Want))
		case tc.Want != nil:
			if got := string(Canonical(v)); got != *tc.Want {
				class = "canonical differs"
				msg = fmt.Sprintf("%s: body %q:\n   Go     %s\n   Python %s", tc.Name, reviewADShort(string(body)), reviewADShort(got), reviewADShort(*tc.Want))
			}
		case !errors.Is(err, ErrBadJSON):
			class = "error not ErrBadJSON"
			msg = fmt.Sprintf("%s: %v", tc.Name, err)
		}
		if class != "" {
			fails[class] = append(fails[class], msg)
		}
	}
	reviewADReport(t, len(vs), fails, 30)
}

func reviewADReport(t *testing.T, n int, fails map[string][]string, show int) {
	t.Helper()
	classes := make([]string, 0, len(fails))
	for c := range fails {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		t.Errorf("%s: %d of %d vectors", c, len(fails[c]), n)
		for i, m := range fails[c] {
			if i == show {
				break
			}
			t.Logf("  %s", m)
		}
	}
}

// TestReviewADDeriveKeyMatchesPython runs the same bodies through DeriveKey
// the way the handler does (skimFor the json: pointers), for a digest
// provider and for one whose event id is json:/id.
func TestReviewADDeriveKeyMatchesPython(t *testing.T) {
	vs := reviewADLoad(t)
	idSrc, err := ParseSource("json:/id")
	if err != nil {
		t.Fatal(err)
	}
	digest := KeyRule{Provider: "p", AccountValue: "default", Fallback: FallbackDigest}
	withID := KeyRule{Provider: "p", AccountValue: "default", EventID: []Source{idSrc}, Fallback: FallbackDigest}
	fails := map[string][]string{}
	h := http.Header{}
	for _, tc := range vs {
		body, _ := base64.StdEncoding.DecodeString(tc.Input)
		pl := NewPayload(h, body, "application/json")
		k, err := DeriveKey(digest, pl)
		if tc.Want == nil {
			if err == nil || !errors.Is(err, ErrBadJSON) {
				fails["digest: not a 400"] = append(fails["digest: not a 400"], fmt.Sprintf("%s: %q -> %v %v", tc.Name, reviewADShort(string(body)), k.Key, err))
			}
		} else {
			sum := sha256.Sum256([]byte(*tc.Want))
			want := "p:default:dig:" + hex.EncodeToString(sum[:])
			if err != nil || k.Key != want {
				fails["digest key differs"] = append(fails["digest key differs"], fmt.Sprintf("%s: %q -> %v %v, want %s", tc.Name, reviewADShort(string(body)), k.Key, err, want))
			}
		}

		pl = NewPayload(h, body, "application/json")
		pl.skimFor([]Pointer{idSrc.ptr})
		k, err = DeriveKey(withID, pl)
		if tc.Want == nil {
			if err == nil || !errors.Is(err, ErrBadJSON) {
				fails["json:/id: not a 400"] = append(fails["json:/id: not a 400"], fmt.Sprintf("%s: %q -> %v %v", tc.Name, reviewADShort(string(body)), k.Key, err))
			}
			continue
		}
		var want string
		if tc.ID != nil {
			want = "p:default:" + *tc.ID
		} else {
			sum := sha256.Sum256([]byte(*tc.Want))
			want = "p:default:dig:" + hex.EncodeToString(sum[:])
		}
		if err != nil || k.Key != want {
			fails["json:/id key differs"] = append(fails["json:/id key differs"], fmt.Sprintf("%s: %q -> %v %v, want %s", tc.Name, reviewADShort(string(body)), k.Key, err, want))
		}
	}
	reviewADReport(t, len(vs), fails, 3)
}

// TestReviewADDigestCollision: two bodies whose Python canonical forms
// differ ({"amount":0.1} and {"amount":1.0}) get one dig: key, so the second
// event is answered "duplicate" and never stored. Root cause: Go's
// strconv.ParseFloat (ParseJSON's overflow check and appendPythonNumber)
// misreads a literal with more than 800 digits before the decimal point
// when it takes its slow path; Python's float() is exact.
//
// CONTRACT.md: "The canonical payload is byte-for-byte Python's
// json.dumps(json.loads(body.decode("utf-8")), sort_keys=True, ...)".
func TestReviewADDigestCollision(t *testing.T) {
	a := []byte(`{"amount":0.1}`)                                         // Python: {"amount":0.1}
	b := []byte(`{"amount":1` + string(bytesRepeat('0', 800)) + `e-800}`) // Python: {"amount":1.0}
	rule := KeyRule{Provider: "p", AccountValue: "default", Fallback: FallbackDigest}
	ka, err := DeriveKey(rule, NewPayload(http.Header{}, a, "application/json"))
	if err != nil {
		t.Fatal(err)
	}
	kb, err := DeriveKey(rule, NewPayload(http.Header{}, b, "application/json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"amount":1.0}`))
	if want := "p:default:dig:" + hex.EncodeToString(sum[:]); kb.Key != want {
		vb, _ := ParseJSON(b)
		t.Errorf("1 followed by 800 zeros e-800: key %s, want %s (Go canonical %s, Python {\"amount\":1.0})", kb.Key, want, Canonical(vb))
	}
	if ka.Key == kb.Key {
		t.Errorf("{\"amount\":0.1} and {\"amount\":1<800 zeros>e-800} share the key %s; Python's canonical forms differ", ka.Key)
	}
}

func bytesRepeat(c byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = c
	}
	return out
}
