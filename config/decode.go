package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder maps a YAML node tree onto Config by reflection. It is ours rather
// than yaml.v3's Decode so that it can expand ${VAR} in every scalar before
// typing it, read file: secrets, reject unknown keys by their full path and
// line, record which keys were given (so defaults do not overwrite an
// explicit 0 or []), and report every problem instead of the first.
type decoder struct {
	baseDir  string
	getenv   func(string) string
	readFile func(baseDir, path string) (string, error) // reads file: secrets
	problems Problems
	warnings Problems        // legal but probably unintended; Check reports them
	set      map[string]bool // key paths given a non-null value
	lines    map[string]int  // key path -> line
	merged   int             // pairs taken through merge keys so far
}

// maxMerged bounds the pairs merge keys may bring in, so that a small file
// merging a mapping that merges another many times over (the billion laughs
// shape) cannot take exponential time.
const maxMerged = 10000

func newDecoder(baseDir string, getenv func(string) string, readFile func(baseDir, path string) (string, error)) *decoder {
	return &decoder{baseDir: baseDir, getenv: getenv, readFile: readFile, set: map[string]bool{}, lines: map[string]int{}}
}

func (d *decoder) errorf(key string, n *yaml.Node, format string, args ...any) {
	p := Problem{Key: key, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line = n.Line
	}
	d.problems = append(d.problems, p)
}

// decodeDocument parses data and decodes its single document into c. A YAML
// syntax error stops there; every other problem is collected.
func (d *decoder) decodeDocument(data []byte, c *Config) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decodeNode(dec, &doc); err != nil {
		if !errors.Is(err, io.EOF) {
			d.problems = append(d.problems, Problem{Msg: "invalid YAML: " + yamlErrorText(err)})
		}
		return // empty file: all defaults
	}
	var extra yaml.Node
	if err := decodeNode(dec, &extra); !errors.Is(err, io.EOF) {
		d.problems = append(d.problems, Problem{Msg: "want one YAML document, found more (a second ---)"})
		return
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return // nothing in it: all defaults
	}
	d.decode("", doc.Content[0], reflect.ValueOf(c).Elem())
}

// yamlAnchorName matches the anchor name the YAML library quotes in its
// alias errors.
var yamlAnchorName = regexp.MustCompile(`anchor '[^']*'`)

// yamlErrorText is the YAML library's error without an anchor's name: an
// unquoted value starting with * is read as an alias, and that value may
// be a secret (secrets: [*9f8e...] said "unknown anchor '9f8e...'").
func yamlErrorText(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.Contains(msg, "unknown anchor") {
		return "an unquoted value starting with * is read as an alias (*name) of an anchor the file does not define; quote the value"
	}
	return yamlAnchorName.ReplaceAllString(msg, "an anchor")
}

// decodeNode is dec.Decode, with a panic in the YAML library turned into an
// error: the input comes from outside and Parse promises not to panic.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	secretType   = reflect.TypeFor[Secret]()
)

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "something else"
}

// decode stores n into v, which is addressable. key is n's path, "" at the
// top. A null node leaves v untouched and the key unset.
func (d *decoder) decode(key string, n *yaml.Node, v reflect.Value) {
	n = resolveAlias(n)
	if n == nil || n.Kind == yaml.AliasNode {
		d.errorf(key, nil, "alias chain too long")
		return
	}
	if isNull(n) {
		return
	}
	t := v.Type()
	switch {
	case t.Kind() == reflect.Struct:
		d.decodeStruct(key, n, v)
	case t.Kind() == reflect.Map:
		d.decodeMap(key, n, v)
	case t.Kind() == reflect.Slice:
		d.decodeSlice(key, n, v)
	case t.Kind() == reflect.Pointer:
		e := reflect.New(t.Elem())
		before := len(d.problems)
		d.decode(key, n, e.Elem())
		if len(d.problems) == before {
			v.Set(e)
		}
	default:
		d.decodeScalar(key, n, v)
	}
}

func (d *decoder) decodeScalar(key string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(key, n, "want a single value, got %s", kindName(n))
		return
	}
	t := v.Type()
	if !d.bareVarOK(key, n, t == secretType) {
		return
	}
	s, err := expand(n.Value, d.getenv)
	if u, ok := err.(errUnset); ok && t == secretType {
		err = u.hide()
	}
	if err != nil {
		d.errorf(key, n, "%v", err)
		return
	}
	if t != secretType && t.Kind() != reflect.String && strings.TrimSpace(s) == "" {
		// "${WORKERS:-}": an empty number, duration or bool is left to
		// its default rather than being an error.
		return
	}
	switch {
	case t == secretType:
		if path, ok := strings.CutPrefix(s, "file:"); ok {
			s, err = d.readFile(d.baseDir, path)
			if err != nil {
				d.errorf(key, n, "%v", err)
				return
			}
		}
		v.SetString(s)
	case t == durationType:
		dur, err := ParseDuration(s)
		if err != nil {
			d.errorf(key, n, "%v, got %q", err, s)
			return
		}
		v.SetInt(int64(dur))
	case t.Kind() == reflect.String:
		v.SetString(s)
	case t.Kind() == reflect.Bool:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.errorf(key, n, "want true or false, got %q", s)
			return
		}
	case t.Kind() == reflect.Int:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 0)
		if err != nil {
			d.errorf(key, n, "want a whole number, got %q", s)
			return
		}
		v.SetInt(i)
	case t.Kind() == reflect.Int64:
		// Every plain int64 in Config is a byte size.
		b, err := ParseBytes(s)
		if err != nil {
			d.errorf(key, n, "%v, got %q", err, s)
			return
		}
		v.SetInt(b)
	default:
		// Unreachable with Config's field types; a new type needs a case.
		d.errorf(key, n, "internal: no decoder for %s", t)
		return
	}
	d.set[key] = true
}

// bareVarOK reports a shell-style $NAME in n's raw text, which expand keeps
// as literal text: a secret written "$STRIPE_SECRET" would be those 14
// characters, and every signed delivery a 401 until the senders give up.
// A secret that is such a reference and nothing else is an error; one
// within other text (a generated secret may hold a $), or a $NAME in
// another value ("$HOME/data"), a warning. Secrets' text is never quoted.
// false: an error was recorded.
func (d *decoder) bareVarOK(key string, n *yaml.Node, secret bool) bool {
	name, whole := bareVar(n.Value)
	switch {
	case name == "":
		return true
	case secret && whole:
		d.errorf(key, n, "a $ and a name, which is not expanded: write ${NAME} to read an environment variable, or $$ for a literal $")
		return false
	case secret:
		d.warnf(key, n, "holds a $ and a name, kept as literal text: if it was meant as an environment variable, write ${NAME}; write $$ for a literal $ to silence this")
	case strings.HasPrefix(n.Value, "json:") || strings.HasPrefix(n.Value, "header:"):
		// A JSON Pointer or header name may well hold a $ ("json:/$id").
	default:
		d.warnf(key, n, "$%s is not expanded (kept as literal text): write ${%s} to read the environment variable, or $$ for a literal $", name, name)
	}
	return true
}

func (d *decoder) warnf(key string, n *yaml.Node, format string, args ...any) {
	p := Problem{Key: key, Msg: fmt.Sprintf(format, args...), Warning: true}
	if n != nil {
		p.Line = n.Line
	}
	d.warnings = append(d.warnings, p)
}

func (d *decoder) decodeSlice(key string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(key, n, "want a list, got %s", kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, e := range n.Content {
		ek := fmt.Sprintf("%s[%d]", key, i)
		d.lines[ek] = e.Line
		if isNull(resolveAlias(e)) {
			d.errorf(ek, e, "empty list entry")
			continue
		}
		d.decode(ek, e, s.Index(i))
	}
	v.Set(s)
	d.set[key] = true
}

// pair is one key: value of a mapping; merged pairs come from a << merge
// key and yield to the mapping's own keys.
type pair struct {
	k, v   *yaml.Node
	merged bool
	in     *yaml.Node // the mapping the pair is written in
}

// pairs lists a mapping's entries with YAML merge keys (<<: *base) expanded,
// so providers can share a block. Own keys override merged ones; among
// merged mappings the first wins, as in the merge-key spec.
func (d *decoder) pairs(key string, n *yaml.Node, stack []*yaml.Node) []pair {
	var own, merged []pair
	stack = append(stack, n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k != nil && k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			srcs := []*yaml.Node{resolveAlias(v)}
			if srcs[0] != nil && srcs[0].Kind == yaml.SequenceNode {
				srcs = srcs[0].Content
			}
			for _, src := range srcs {
				src = resolveAlias(src)
				switch {
				case src == nil || src.Kind != yaml.MappingNode:
					d.errorf(key, k, "a merge key (<<) wants a mapping or a list of mappings")
					continue
				case slices.Contains(stack, src):
					d.errorf(key, k, "a merge key (<<) refers to a mapping that contains it")
					continue
				case d.merged > maxMerged:
					if d.merged != math.MaxInt {
						d.errorf(key, k, "merge keys (<<) bring in more than %d keys", maxMerged)
						d.merged = math.MaxInt // said once
					}
					return nil
				}
				if d.merged < math.MaxInt {
					// Count the visit too: mappings holding nothing but
					// merge keys bring in no pairs, and nested ones would
					// otherwise be expanded exponentially.
					d.merged++
				}
				for _, p := range winners(d.pairs(key, src, stack)) {
					p.merged = true
					merged = append(merged, p)
					if d.merged < math.MaxInt {
						d.merged++
					}
				}
			}
			continue
		}
		own = append(own, pair{k: k, v: v, in: n})
	}
	return append(merged, own...)
}

// winners is a merged mapping's pairs as the mapping itself reads them:
// a pair it merged in (from a nested <<) is dropped when one of its own
// keys, or an earlier merged pair, has that name. Flattened as they were,
// the nested block's value won over the merged block's own key (review 9).
// The mapping's own pairs all stay, duplicates too, for entries to report.
func winners(ps []pair) []pair {
	own := map[string]bool{}
	for _, p := range ps {
		if !p.merged && p.k != nil && p.k.Kind == yaml.ScalarNode {
			own[p.k.Value] = true
		}
	}
	first := map[string]pair{} // each name's first merged pair
	out := make([]pair, 0, len(ps))
	for _, p := range ps {
		if p.merged && p.k != nil && p.k.Kind == yaml.ScalarNode {
			name := p.k.Value
			if own[name] {
				continue
			}
			// A later merged pair loses, unless it is written in the same
			// block as the first (a duplicate entries reports) and is not
			// that very pair merged twice.
			if f, ok := first[name]; ok && (f.in != p.in || f.k == p.k) {
				continue
			} else if !ok {
				first[name] = p
			}
		}
		out = append(out, p)
	}
	return out
}

// entries checks a mapping's keys and returns its entries by name in order,
// reporting non-string and duplicate keys.
func (d *decoder) entries(key string, n *yaml.Node) (names []string, vals map[string]pair) {
	if n.Kind != yaml.MappingNode {
		d.errorf(key, n, "want a mapping (key: value), got %s", kindName(n))
		return nil, nil
	}
	vals = map[string]pair{}
	for _, p := range d.pairs(key, n, nil) {
		if p.k == nil || p.k.Kind != yaml.ScalarNode {
			d.errorf(key, p.k, "keys must be plain strings")
			continue
		}
		name := p.k.Value
		prev, dup := vals[name]
		switch {
		case !dup:
			names = append(names, name)
		case !p.merged && !prev.merged:
			d.errorf(joinKey(key, name), p.k, "key given twice (first on line %d)", prev.k.Line)
			continue
		case p.merged && prev.merged && p.in == prev.in && p.k != prev.k:
			// Twice in the merged mapping itself: as anywhere else, an
			// error, not a silent first-wins (review 9).
			d.errorf(joinKey(key, name), p.k, "key given twice in the merged block (first on line %d)", prev.k.Line)
			continue
		case p.merged && prev.merged:
			continue // the earlier merge wins
		}
		vals[name] = p
	}
	return names, vals
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func (d *decoder) decodeMap(key string, n *yaml.Node, v reflect.Value) {
	names, vals := d.entries(key, n)
	if vals == nil {
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, name := range names {
		p := vals[name]
		k := joinKey(key, name)
		d.lines[k] = p.k.Line
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(k, p.v, e)
		v.SetMapIndex(reflect.ValueOf(name), e)
	}
	d.set[key] = true
}

func (d *decoder) decodeStruct(key string, n *yaml.Node, v reflect.Value) {
	names, vals := d.entries(key, n)
	if vals == nil {
		return
	}
	t := v.Type()
	fields := map[string]int{}
	var known []string
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("yaml")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		known = append(known, tag)
	}
	for _, name := range names {
		p := vals[name]
		k := joinKey(key, name)
		i, ok := fields[name]
		if !ok && key == "" && strings.HasPrefix(name, "x-") {
			continue // extension key, a place to define anchors (as in Compose files)
		}
		if !ok {
			msg, meant := "unknown key", ""
			if s := suggest(name, known); s != "" {
				msg += "; did you mean " + s + "?"
				meant = joinKey(key, s)
			}
			d.errorf(k, p.k, "%s", msg)
			d.problems[len(d.problems)-1].meant = meant
			continue
		}
		d.lines[k] = p.k.Line
		d.decode(k, p.v, v.Field(i))
	}
	d.set[key] = true
}

// suggest returns the known key closest to name when it is close enough to
// be a typo.
func suggest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(name), k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
