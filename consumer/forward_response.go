package consumer

import (
	"cmp"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// forwardResponseRead is how much of a refusal's body is looked at
	// for its excerpt.
	forwardResponseRead = 2 << 10
	// forwardResponseMax bounds the excerpt kept in a dead letter.
	forwardResponseMax = 300
	// forwardResponseTail is what is dropped from the end of a read cut
	// short, longer than any credential one would put in a URL.
	forwardResponseTail = 256
	// forwardSecretMin is the shortest URL part taken for a credential:
	// shorter query values and path segments ("1", "v2", "api") are
	// words a receiver's answer uses for other things.
	forwardSecretMin = 6
)

// forwardSecrets lists what of the configured URL and secrets may be a
// credential, in the forms a receiver's answer may echo them: the user
// info (also as a Basic header's value), the query as a whole and each of
// its values, path segments that look like tokens, the fragment, each raw
// and decoded; the signing secrets as configured and without their whsec_
// prefix. Longest first, so a part inside another is not cut out of it
// first.
func forwardSecrets(u *url.URL, raw []string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= forwardSecretMin {
			out = append(out, s)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s && len(d) >= forwardSecretMin {
			out = append(out, d)
		}
	}
	if u.User != nil {
		user := u.User.Username()
		pass, _ := u.User.Password()
		// User info is a credential however short; and net/http sends it
		// as Authorization: Basic base64(user:pass), which a 401 page may
		// echo (found by review).
		for _, c := range []string{user, pass} {
			if c != "" {
				out = append(out, c)
			}
		}
		add(base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)))
	}
	if u.RawQuery != "" {
		out = append(out, u.RawQuery) // as a whole, however short
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			add(v)
			add(url.QueryEscape(v))
		}
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		// A path's words ("services", "webhooks") are not tokens; its
		// tokens (Slack's T0A1B2C3D, a 24-letter secret) have a digit
		// or are long.
		if len(seg) >= 16 || strings.ContainsAny(seg, "0123456789") {
			add(seg)
		}
	}
	add(u.EscapedFragment())
	for _, s := range raw {
		add(s)
		add(strings.TrimPrefix(s, forwardSecretPrefix))
	}
	// Longest first; equal ones side by side, so Compact drops repeats.
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// responseExcerpt is what an operator reading a dead letter needs of the
// receiver's refusal: its text, white space folded to single spaces,
// control and format characters (bidi overrides) dropped, every credential
// of the URL or secret replaced by REDACTED, at most forwardResponseMax
// bytes and "..." when cut. "" for an empty or binary body (invalid UTF-8
// or a NUL: a binary answer says nothing readable).
func responseExcerpt(body []byte, secrets []string) string {
	if len(body) == 0 {
		return ""
	}
	// A cut inside a rune at the read's end is not the body's fault.
	for i := 0; i < utf8.UTFMax && len(body) > 0 && !utf8.Valid(body); i++ {
		body = body[:len(body)-1]
	}
	if !utf8.Valid(body) {
		return ""
	}
	// A read cut short may end inside a credential, whose first part no
	// match finds: its last bytes are dropped (found by review).
	if len(body) >= forwardResponseRead {
		body = body[:len(body)-forwardResponseTail]
	}
	// JSON may write "/" as "\/" (PHP does): read as "/", so a credential
	// with a slash is found.
	s := strings.ReplaceAll(string(body), `\/`, "/")
	// Redact before folding: folding could join a credential's halves
	// across a line break, or split it. ASCII case is ignored, so a
	// percent-encoding echoed in lower case is found too.
	for _, sec := range secrets {
		s = replaceFoldASCII(s, sec, "REDACTED")
	}
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case r == 0:
			return ""
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError:
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if b.Len()+utf8.RuneLen(r) > forwardResponseMax {
			b.WriteString("...")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// replaceFoldASCII replaces every occurrence of old in s, ignoring ASCII
// case, with repl. ASCII folding keeps byte offsets, so positions found in
// the folded copy are s's.
func replaceFoldASCII(s, old, repl string) string {
	if old == "" {
		return s
	}
	low, lowOld := lowerASCII(s), lowerASCII(old)
	var b strings.Builder
	last := 0
	for i := 0; ; {
		j := strings.Index(low[i:], lowOld)
		if j < 0 {
			break
		}
		b.WriteString(s[last : i+j])
		b.WriteString(repl)
		i += j + len(old)
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
