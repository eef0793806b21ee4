package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The hostile-input corpus: one JSON file per request in testdata/corpus,
// run against one hookgate (see testdata/corpus/README.md for the format).
// Signatures are computed at run time from each case's recipe, so
// timestamps are relative to now and tampering is explicit.

// corpusText is a byte string in a case file: a JSON string (UTF-8), or a
// generator object {"b64": "..."}, {"repeat": "x", "count": N} or
// {"concat": [text, ...]}, so large and non-UTF-8 bodies stay small on disk.
type corpusText []byte

func (t *corpusText) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = corpusText(s)
		return nil
	}
	var g struct {
		B64    *string      `json:"b64"`
		Repeat *string      `json:"repeat"`
		Count  int          `json:"count"`
		Concat []corpusText `json:"concat"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return fmt.Errorf("text: want a string or a b64/repeat/concat object: %w", err)
	}
	switch {
	case g.B64 != nil:
		v, err := base64.StdEncoding.DecodeString(*g.B64)
		if err != nil {
			return fmt.Errorf("text b64: %w", err)
		}
		*t = v
	case g.Repeat != nil:
		if g.Count < 0 || g.Count > 64<<20 {
			return fmt.Errorf("text repeat: count %d out of range", g.Count)
		}
		*t = bytes.Repeat([]byte(*g.Repeat), g.Count)
	case g.Concat != nil:
		var out []byte
		for _, p := range g.Concat {
			out = append(out, p...)
		}
		*t = out
	default:
		return errors.New("text: empty generator object")
	}
	return nil
}

// header is one header line, [name, value]; repeated names are sent
// repeated, in order.
type corpusHeader struct {
	Name  string
	Value corpusText
}

func (h *corpusHeader) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil || len(pair) != 2 {
		return fmt.Errorf("header: want [name, value], got %s", b)
	}
	if err := json.Unmarshal(pair[0], &h.Name); err != nil {
		return fmt.Errorf("header name: %w", err)
	}
	return json.Unmarshal(pair[1], &h.Value)
}

type corpusCase struct {
	name      string
	About     string         `json:"about"`
	Provider  string         `json:"provider"`
	Method    string         `json:"method"`
	Path      string         `json:"path"`
	Transport string         `json:"transport"`
	Headers   []corpusHeader `json:"headers"`
	Body      corpusText     `json:"body"`
	Sign      *signSpec      `json:"sign"`
	Raw       rawSpec        `json:"raw"`
	Want      corpusWant     `json:"want"`
	KnownBug  string         `json:"known_bug"`
}

// signSpec says how the sender signs; the default is a correct signature.
type signSpec struct {
	Scheme      string      `json:"scheme"`
	ID          corpusText  `json:"id"`
	SignedID    *corpusText `json:"signed_id"`
	Body        *corpusText `json:"body"`
	TSOffset    string      `json:"ts_offset"`
	TSText      string      `json:"ts_text"`
	TSUnit      string      `json:"ts_unit"`
	SentTSDelta string      `json:"sent_ts_delta"`
	Secret      string      `json:"secret"`
	KeyAsIs     bool        `json:"key_as_is"`
	Encoding    string      `json:"encoding"`
	Format      string      `json:"format"`
	Omit        []string    `json:"omit"`
	Double      []string    `json:"double"`
}

// rawSpec shapes a request written byte by byte on a net.Conn.
type rawSpec struct {
	Target        string       `json:"target"`
	Proto         string       `json:"proto"`
	Lines         []corpusText `json:"lines"`
	NoHost        bool         `json:"no_host"`
	ContentLength string       `json:"content_length"`
	CLDelta       int          `json:"content_length_delta"`
	Chunked       int          `json:"chunked"`
	Wire          *corpusText  `json:"wire"`
	HalfClose     bool         `json:"half_close"`
	Trickle       string       `json:"trickle"`
}

type corpusWant struct {
	Status       int               `json:"status"`
	StatusAny    []int             `json:"status_any"`
	ClosedOK     bool              `json:"closed_ok"`
	Within       string            `json:"within"`
	Plain        bool              `json:"plain"`
	Error        string            `json:"error"`
	BodyContains string            `json:"body_contains"`
	Header       map[string]string `json:"header"`
	Answer       string            `json:"answer"`
	Key          corpusText        `json:"key"`
	KeyPrefix    string            `json:"key_prefix"`
	KeyHashOf    *corpusText       `json:"key_hash_of"`
	Stored       map[string]string `json:"stored"`
	NotStored    []string          `json:"not_stored"`
	Reclaim      bool              `json:"reclaim"`
}

func loadCorpus(t *testing.T, dir string) []*corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var cases []*corpusCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := &corpusCase{name: strings.TrimSuffix(filepath.Base(f), ".json")}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Want.Status == 0 && len(c.Want.StatusAny) == 0 {
			t.Fatalf("%s: want.status or want.status_any is required", f)
		}
		if c.Method == "" {
			c.Method = http.MethodPost
		}
		if c.Path == "" {
			c.Path = "/webhooks/" + c.Provider
		}
		cases = append(cases, c)
	}
	return cases
}

// sign returns the signature headers of c's recipe, computed at now.
func (c *corpusCase) sign(now time.Time) ([]corpusHeader, error) {
	s := c.Sign
	if s == nil {
		return nil, nil
	}
	signBody := []byte(c.Body)
	if s.Body != nil {
		signBody = *s.Body
	}
	var (
		mac    []byte
		hdrs   []corpusHeader
		sigHdr string
		format string
		enc    = s.Encoding
	)
	switch s.Scheme {
	case "standard-webhooks":
		secret := grantsSecret
		if s.Secret != "" {
			secret = s.Secret
		}
		key := []byte(secret)
		if !s.KeyAsIs {
			var err error
			if key, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err != nil {
				return nil, fmt.Errorf("secret: %w", err)
			}
		}
		ts := now
		if s.TSOffset != "" {
			d, err := time.ParseDuration(s.TSOffset)
			if err != nil {
				return nil, err
			}
			ts = ts.Add(d)
		}
		unix := func(t time.Time) string {
			if s.TSUnit == "ms" {
				return strconv.FormatInt(t.UnixMilli(), 10)
			}
			return strconv.FormatInt(t.Unix(), 10)
		}
		signedTS := unix(ts)
		if s.TSText != "" {
			signedTS = strings.ReplaceAll(s.TSText, "{now}", strconv.FormatInt(now.Unix(), 10))
		}
		sentTS := signedTS
		if s.SentTSDelta != "" {
			d, err := time.ParseDuration(s.SentTSDelta)
			if err != nil {
				return nil, err
			}
			sentTS = unix(ts.Add(d))
		}
		signedID := []byte(s.ID)
		if s.SignedID != nil {
			signedID = *s.SignedID
		}
		m := hmac.New(sha256.New, key)
		m.Write(signedID)
		m.Write([]byte("." + signedTS + "."))
		m.Write(signBody)
		mac = m.Sum(nil)
		hdrs = []corpusHeader{{"webhook-id", s.ID}, {"webhook-timestamp", corpusText(sentTS)}}
		sigHdr, format = "webhook-signature", "v1,{sig}"
		if enc == "" {
			enc = "base64"
		}
	case "hmac-sha256":
		secret := portalSecret
		if s.Secret != "" {
			secret = s.Secret
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(signBody)
		mac = m.Sum(nil)
		sigHdr, format = "X-Portal-Signature", "sha256={sig}"
		if enc == "" {
			enc = "hex"
		}
	default:
		return nil, fmt.Errorf("unknown sign.scheme %q", s.Scheme)
	}
	var sig string
	switch enc {
	case "base64":
		sig = base64.StdEncoding.EncodeToString(mac)
	case "base64-raw":
		sig = base64.RawStdEncoding.EncodeToString(mac)
	case "base64url-raw":
		sig = base64.RawURLEncoding.EncodeToString(mac)
	case "hex":
		sig = hex.EncodeToString(mac)
	case "hex-upper":
		sig = strings.ToUpper(hex.EncodeToString(mac))
	case "hex63":
		sig = hex.EncodeToString(mac)[:63]
	default:
		return nil, fmt.Errorf("unknown sign.encoding %q", enc)
	}
	if s.Format != "" {
		format = s.Format
	}
	hdrs = append(hdrs, corpusHeader{sigHdr, corpusText(strings.ReplaceAll(format, "{sig}", sig))})
	var out []corpusHeader
	for _, h := range hdrs {
		if slices.ContainsFunc(s.Omit, func(n string) bool { return strings.EqualFold(n, h.Name) }) {
			continue
		}
		out = append(out, h)
		if slices.ContainsFunc(s.Double, func(n string) bool { return strings.EqualFold(n, h.Name) }) {
			out = append(out, h)
		}
	}
	return out, nil
}

func TestCorpus(t *testing.T) {
	cases := loadCorpus(t, filepath.Join("testdata", "corpus"))
	if len(cases) < 40 {
		t.Fatalf("corpus has %d cases, want at least 40", len(cases))
	}
	e := newEnv(t, "")
	hg := start(t, e.cfgPath)
	j := natsClient(t, e.natsURL, natsToken)
	u, err := url.Parse(hg.baseURL)
	if err != nil {
		t.Fatal(err)
	}
	before := storedKeys(t, j)

	accepted := map[string]string{} // key -> the case that got it accepted
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var (
				res corpusResult
				err error
			)
			switch c.Transport {
			case "", "http":
				res, err = c.sendHTTP(hg.baseURL)
			case "raw":
				res, err = c.sendRaw(u.Host, 20*time.Second)
			default:
				t.Fatalf("unknown transport %q", c.Transport)
			}
			if err != nil {
				t.Fatalf("%s: sending: %v", c.About, err)
			}
			problems, key := c.check(res)
			if key != "" {
				if prev, dup := accepted[key]; dup {
					problems = append(problems, fmt.Sprintf("key %q was already accepted by %s", key, prev))
				}
				accepted[key] = c.name
				msgs := corpusStoredMsgs(t, j)[key]
				if len(msgs) != 1 {
					problems = append(problems, fmt.Sprintf("key %q stored %d times, want once", key, len(msgs)))
				} else {
					problems = append(problems, c.checkStored(msgs[0], key)...)
				}
			}
			if len(problems) == 0 {
				if c.KnownBug != "" {
					t.Logf("known_bug %q no longer reproduces: remove the marker from %s.json", c.KnownBug, c.name)
				}
				return
			}
			if c.KnownBug != "" {
				t.Skipf("KNOWN GATEWAY BUG (%s): %s; got: %s", c.KnownBug, c.About, strings.Join(problems, "; "))
			}
			t.Errorf("%s:\n  %s", c.About, strings.Join(problems, "\n  "))
		})
	}

	// A rejected request claims no key: the same event, correctly signed,
	// is then accepted as new.
	for _, c := range cases {
		if !c.Want.Reclaim {
			continue
		}
		ok := *c
		ok.Sign = &signSpec{Scheme: c.Sign.Scheme, ID: c.Sign.ID}
		ok.Transport, ok.Headers = "http", nil
		ok.Want = corpusWant{Status: http.StatusOK, Key: corpusText("grants:default:evt:" + string(c.Sign.ID))}
		res, err := ok.sendHTTP(hg.baseURL)
		if err != nil {
			t.Fatal(err)
		}
		problems, key := ok.check(res)
		if len(problems) > 0 {
			t.Errorf("%s re-sent correctly signed: %s", c.name, strings.Join(problems, "; "))
			continue
		}
		accepted[key] = c.name + " (re-sent)"
	}

	// The server is healthy and still takes a normal delivery.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := corpusClient.Get(hg.baseURL + path)
		if err != nil {
			t.Fatalf("GET %s after the corpus: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s after the corpus = %d", path, resp.StatusCode)
		}
	}
	body := []byte(`{"grant_id":"G-after","type":"x","occurred_at":"2026-11-30T10:00:00Z"}`)
	a := expect(t, post(t, hg.baseURL+"/webhooks/grants", signGrants(t, "c_after_corpus", body), body), 200, "status", "accepted")
	accepted[a["key"]] = "normal delivery after the corpus"

	// Only accepted events were stored, each exactly once.
	seen := map[string]int{}
	for _, k := range storedKeys(t, j) {
		seen[k]++
	}
	for _, k := range before {
		seen[k]--
	}
	for k, n := range seen {
		switch {
		case n == 0:
		case accepted[k] == "":
			t.Errorf("WEBHOOKS holds %q (%d times), which no case was answered 200 accepted for", k, n)
		case n != 1:
			t.Errorf("WEBHOOKS holds %q %d times, want once", k, n)
		}
	}
	for k, who := range accepted {
		if seen[k] != 1 {
			t.Errorf("%s: key %q is stored %d times, want once", who, k, seen[k])
		}
	}
	select {
	case <-hg.done:
		t.Fatalf("hookgate exited during the corpus:\n%s", hg.stderr)
	default:
	}
}
