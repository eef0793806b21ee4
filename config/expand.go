package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// expand substitutes ${VAR} and ${VAR:-default} in s; $$ is a literal $,
// and a $ followed by anything else is kept as is. getenv cannot tell an
// empty variable from an unset one (os.Getenv's signature), so empty counts
// as unset: ${VAR} is then an error and ${VAR:-default} gives default, as
// in the shell. Defaults are literal text up to the first }: no nesting.
// Errors never quote s, which may be a secret.
func expand(s string, getenv func(string) string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
			continue
		case '{':
		default:
			b.WriteByte('$')
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New("unterminated ${ (write $$ for a literal $)")
		}
		expr := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(expr, ":-")
		if strings.Contains(def, "${") {
			// "${A:-${B}}" read as the default "${B" and a literal "}":
			// a wrong secret and no problem reported (review 9).
			return "", errors.New("a ${...} inside a default is not supported: defaults are literal text")
		}
		if !validVarName(name) {
			return "", errors.New("invalid variable name in ${...}: want letters, digits and _ (write $$ for a literal $)")
		}
		v := getenv(name)
		if v == "" {
			if !hasDef {
				return "", errUnset(name)
			}
			v = def
		}
		b.WriteString(v)
	}
}

// errUnset is expand's error for an unset variable. expand's caller hides
// a name that may be a secret's text (errUnset.hide).
type errUnset string

func (e errUnset) Error() string {
	return fmt.Sprintf("environment variable %s is unset or empty", string(e))
}

// hide is the error for a secret's value: the name only when it looks
// like a variable's by convention (capitals, digits and _), since a secret
// pasted inside the braces, or a generated one holding "${", would be
// printed otherwise (review AC).
func (e errUnset) hide() error {
	for _, c := range string(e) {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return errors.New("an environment variable named in ${...} is unset or empty (its name is not shown: this value is a secret, and the name is not in capitals as a variable's would be)")
		}
	}
	return e
}

// bareVar finds the first $NAME in s that expand keeps as literal text (a
// $ followed by a letter or _, outside $$ and ${...}): the shell's form of
// a variable, which hookgate does not expand. whole: s is that reference
// and nothing else.
func bareVar(s string) (name string, whole bool) {
	for i := 0; i < len(s)-1; i++ {
		if s[i] != '$' {
			continue
		}
		switch c := s[i+1]; {
		case c == '$':
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", false
			}
			i += end
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
			j := i + 2
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			return s[i+1 : j], i == 0 && j == len(s)
		}
	}
	return "", false
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// maxSecretFile bounds a file: secret; real ones are tens of bytes.
const maxSecretFile = 64 << 10

// readSecretFile reads a file: secret, relative to baseDir, dropping one
// trailing newline (echo and most editors add one). Only regular files are
// read, so a path like /dev/stdin cannot hang startup. Errors name the path,
// never the content.
func readSecretFile(baseDir, path string) (string, error) {
	if path == "" {
		return "", errors.New(`secret file: empty path after "file:"`)
	}
	if !filepath.IsAbs(path) && baseDir != "" {
		path = filepath.Join(baseDir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("secret file %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("secret file %s: %w", path, err)
	}
	if len(data) > maxSecretFile {
		return "", fmt.Errorf("secret file %s: larger than %d bytes", path, maxSecretFile)
	}
	s := string(data)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, nil
}
