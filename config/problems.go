package config

import (
	"strconv"
	"strings"
	"unicode"
)

// Problem is one thing wrong with a config, tied to the key it concerns.
type Problem struct {
	// Key is the dotted path of the key, with list indexes:
	// "providers.grantsgov.signature.secrets[0]". Empty for problems with
	// the file as a whole (invalid YAML).
	Key string
	// Msg says what is wrong and, where it can, what is wanted. It never
	// contains a secret.
	Msg string
	// Warning marks something legal but probably unintended; a config with
	// only warnings is valid.
	Warning bool
	// Line is the key's line in the file, 0 when unknown (a defaulted key,
	// a Config not made by Parse).
	Line int
	// meant is, for an unknown key, the known key it was probably meant
	// to be ("" if none is close).
	meant string
}

// String writes the problem as one line: "key: message", with "warning: "
// before the message for a warning and " (line N)" after it when known.
// Control characters are escaped so the line stays one line.
func (p Problem) String() string {
	var b strings.Builder
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	if p.Warning {
		b.WriteString("warning: ")
	}
	b.WriteString(p.Msg)
	if p.Line > 0 {
		b.WriteString(" (line ")
		b.WriteString(strconv.Itoa(p.Line))
		b.WriteString(")")
	}
	return oneLine(b.String())
}

// oneLine escapes control characters (a provider name or a placeholder
// with a newline in it), so that a problem stays one line of output.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Problems is every problem found, in file order for parse problems and
// section order for Validate's. It is the error Parse, Load and Validate
// return; get at it with errors.As.
type Problems []Problem

// Error joins the problems, one line each.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Errors returns the problems that are not warnings.
func (ps Problems) Errors() Problems {
	var out Problems
	for _, p := range ps {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// Warnings returns the warnings.
func (ps Problems) Warnings() Problems {
	var out Problems
	for _, p := range ps {
		if p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// except returns the problems of ps that cannot follow from one of bad's:
// those whose check reads no key of bad's groups (reads), and not on a key
// related to one. A check may compare keys (dedup.window with
// dedup.horizon, retention with dedup and http, a provider's ordering with
// its subject), and a value that could not be read is checked as its
// default, so a problem there may be the unread value's, not the file's. A
// problem of bad without a key (the file as a whole) excludes everything.
func (ps Problems) except(bad Problems) Problems {
	var out Problems
next:
	for _, p := range ps {
		for _, b := range bad {
			if b.Key == "" || checkReads(p, b.Key) || related(p.Key, b.Key) {
				continue next
			}
			// A misspelt key leaves the key it was meant to be unset, when
			// decode could tell which (a misspelt "dedupe:" section left
			// dedup.horizon at its default, and retention was checked
			// against that; review 9): the checks that read that key.
			// ("provider:" meant "providers", and every provider is inside
			// that key, but none reads it.) When it could not tell, any
			// sibling's.
			if b.meant != "" && checkReads(p, b.meant) {
				continue next
			}
			if i := strings.LastIndexByte(b.Key, '.'); b.meant == "" && i > 0 && strings.HasPrefix(b.Msg, "unknown key") && related(p.Key, b.Key[:i]) {
				continue next
			}
		}
		out = append(out, p)
	}
	return out
}

// checkReads reports whether the check that found p reads key (or a key
// inside it). Where Check's checks are known key by key (the sections
// outside providers), exactly those: a misspelt nats key, or a token from
// an unset variable, hid dedup.window's error, which reads dedup alone;
// an unreadable consumer.workers hid consumer.max_deliver's (review Y).
// Elsewhere (a provider's entry, whose checks read each other's keys) by
// group.
func checkReads(p Problem, key string) bool {
	if keys, ok := readKeys(p); ok {
		for _, k := range keys {
			if related(k, key) {
				return true
			}
		}
		return false
	}
	return reads(group(p.Key), group(key))
}

// readKeys lists the keys the check that found p reads (see Check); ok is
// false where they are not known key by key.
func readKeys(p Problem) (keys []string, ok bool) {
	k := p.Key
	if i := strings.IndexByte(k, '['); i >= 0 {
		k = k[:i] // consumer.backoff[2]: the list's check
	}
	section, _, _ := strings.Cut(k, ".")
	switch {
	case k == "dedup.window" && p.Warning: // the short-window warning: embedded gateways only
		return []string{k, "dedup.horizon", "nats", "roles"}, true
	case k == "dedup.window":
		return []string{k, "dedup.horizon"}, true
	case section == "retention" && strings.HasSuffix(k, ".max_age"): // against the horizon or the window
		return []string{k, "dedup"}, true
	case section == "retention" && strings.HasSuffix(k, ".max_bytes"):
		return []string{k, "http.max_body_bytes"}, true
	case k == "http.admin_listen":
		return []string{k, "http.listen"}, true
	case k == "nats.embedded.listen":
		return []string{k, "nats.url", "http.listen", "http.admin_listen"}, true
	case section == "nats" || section == "providers":
		return nil, false // nats's checks read url, replicas and the embedded keys together
	case section == "http" && strings.HasPrefix(k, "http.tls."):
		return []string{"http.tls"}, true
	case section == "dedup" || section == "consumer" || section == "http" || section == "log" || section == "roles":
		return []string{k}, true
	}
	return nil, false
}

// group is the part of the config a key belongs to: its top-level section
// (http, nats, dedup, ...), or a provider's secrets, the rest of its
// signature, or the rest of its entry.
func group(key string) string {
	rest, ok := strings.CutPrefix(key, "providers.")
	if !ok {
		section, _, _ := strings.Cut(key, ".")
		section, _, _ = strings.Cut(section, "[")
		return section
	}
	name, rest, _ := strings.Cut(rest, ".")
	name, _, _ = strings.Cut(name, "[")
	switch {
	case rest == "signature.secrets" || strings.HasPrefix(rest, "signature.secrets["):
		return "providers." + name + ".signature.secrets"
	case rest == "signature" || strings.HasPrefix(rest, "signature."):
		return "providers." + name + ".signature"
	}
	return "providers." + name
}

// reads reports whether the check of a key in group p reads keys of group
// b (see Check). Before, every section outside providers was one group,
// and a provider's secrets one with its signature: a misspelt http key, or
// a secret from an unset variable (CI without secrets), hid every other
// problem there (review 9).
func reads(p, b string) bool {
	switch {
	case p == b:
		return true
	case p == "dedup": // the short-window warning: embedded gateways only
		return b == "nats" || b == "roles"
	case p == "retention": // max_bytes against a body, max_age against dedup
		return b == "http" || b == "dedup"
	case strings.HasSuffix(p, ".signature.secrets"): // secrets' form is the scheme's
		return b == strings.TrimSuffix(p, ".secrets")
	}
	return false
}

// related reports whether one dotted key is the other or inside it.
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a) && (len(a) == len(b) || b[len(a)] == '.' || b[len(a)] == '[')
}
