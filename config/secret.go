package config

import (
	"fmt"
	"io"
	"log/slog"
)

// Secret is a signing secret or token. It prints as REDACTED in every
// format (fmt, slog, JSON) so it cannot leak into logs, errors, metrics or
// the audit stream; use Reveal for the bytes that go into a MAC.
type Secret string

// Reveal returns the secret's value. Call it only where the value is used
// (computing or checking a MAC), never to print it.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string { return "REDACTED" }

// GoString implements fmt.GoStringer so %#v redacts too.
func (s Secret) GoString() string { return `"REDACTED"` }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// MarshalText implements encoding.TextMarshaler (JSON, YAML output).
func (s Secret) MarshalText() ([]byte, error) { return []byte("REDACTED"), nil }

// Format implements fmt.Formatter so that every verb redacts: without it a
// verb String does not serve (%d, %b on a struct holding a Secret) would
// print the raw string.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' || (verb == 'v' && f.Flag('#')) {
		io.WriteString(f, `"REDACTED"`)
		return
	}
	io.WriteString(f, "REDACTED")
}
