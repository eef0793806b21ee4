package bench

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Profile is a CPU profile reduced to what a flame graph and a top list
// need: stacks of function names, root first, with their CPU time.
type Profile struct {
	Unit    string // of Value, "nanoseconds" for CPU profiles
	Samples []Sample
	Total   int64
}

// Sample is one stack and its value.
type Sample struct {
	Stack []string // root first, inlined frames expanded
	Value int64
}

// ParseProfile decodes a pprof profile (gzipped profile.proto, as
// runtime/pprof writes it) with the standard library alone. It keeps the
// last sample value (CPU nanoseconds for a CPU profile).
func ParseProfile(data []byte) (*Profile, error) {
	if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	type rawSample struct {
		locs   []uint64
		values []int64
	}
	var (
		strs       []string
		samples    []rawSample
		locLines   = map[uint64][]uint64{} // location id -> function ids, leaf (inlined) first
		funcName   = map[uint64]int64{}    // function id -> string index
		valueTypes [][2]int64
	)
	err := eachField(data, func(num int, wt int, v uint64, b []byte) error {
		switch num {
		case 1: // sample_type
			var vt [2]int64
			_ = eachField(b, func(n, _ int, v uint64, _ []byte) error {
				if n == 1 || n == 2 {
					vt[n-1] = int64(v)
				}
				return nil
			})
			valueTypes = append(valueTypes, vt)
		case 2: // sample
			var s rawSample
			err := eachField(b, func(n, wt int, v uint64, b []byte) error {
				switch n {
				case 1:
					if wt == 2 {
						return eachVarint(b, func(x uint64) { s.locs = append(s.locs, x) })
					}
					s.locs = append(s.locs, v)
				case 2:
					if wt == 2 {
						return eachVarint(b, func(x uint64) { s.values = append(s.values, int64(x)) })
					}
					s.values = append(s.values, int64(v))
				}
				return nil
			})
			if err != nil {
				return err
			}
			samples = append(samples, s)
		case 4: // location
			var id uint64
			var fns []uint64
			err := eachField(b, func(n, _ int, v uint64, b []byte) error {
				switch n {
				case 1:
					id = v
				case 4: // line
					return eachField(b, func(n, _ int, v uint64, _ []byte) error {
						if n == 1 {
							fns = append(fns, v)
						}
						return nil
					})
				}
				return nil
			})
			if err != nil {
				return err
			}
			locLines[id] = fns
		case 5: // function
			var id uint64
			var name int64
			_ = eachField(b, func(n, _ int, v uint64, _ []byte) error {
				switch n {
				case 1:
					id = v
				case 2:
					name = int64(v)
				}
				return nil
			})
			funcName[id] = name
		case 6: // string_table
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("parse profile: %w", err)
	}
	p := &Profile{}
	if len(valueTypes) > 0 {
		if u := valueTypes[len(valueTypes)-1][1]; u >= 0 && int(u) < len(strs) {
			p.Unit = strs[u]
		}
	}
	name := func(fid uint64) string {
		if i, ok := funcName[fid]; ok && i >= 0 && int(i) < len(strs) {
			return strs[i]
		}
		return fmt.Sprintf("func#%d", fid)
	}
	for _, s := range samples {
		if len(s.values) == 0 {
			continue
		}
		var stack []string
		// locs are leaf first; within a location, lines are leaf
		// (innermost inlined) first: reverse both for root first.
		for i := len(s.locs) - 1; i >= 0; i-- {
			fns := locLines[s.locs[i]]
			for j := len(fns) - 1; j >= 0; j-- {
				stack = append(stack, name(fns[j]))
			}
		}
		v := s.values[len(s.values)-1]
		p.Samples = append(p.Samples, Sample{Stack: stack, Value: v})
		p.Total += v
	}
	return p, nil
}

// eachField walks the protobuf fields of b: varints in v, length-delimited
// in b.
func eachField(b []byte, f func(num, wireType int, v uint64, b []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("bad field key")
		}
		b = b[n:]
		num, wt := int(key>>3), int(key&7)
		switch wt {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return errors.New("bad varint")
			}
			b = b[n:]
			if err := f(num, wt, v, nil); err != nil {
				return err
			}
		case 1:
			if len(b) < 8 {
				return errors.New("short fixed64")
			}
			if err := f(num, wt, binary.LittleEndian.Uint64(b), nil); err != nil {
				return err
			}
			b = b[8:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return errors.New("bad length")
			}
			if err := f(num, wt, 0, b[n:n+int(l)]); err != nil {
				return err
			}
			b = b[n+int(l):]
		case 5:
			if len(b) < 4 {
				return errors.New("short fixed32")
			}
			if err := f(num, wt, uint64(binary.LittleEndian.Uint32(b)), nil); err != nil {
				return err
			}
			b = b[4:]
		default:
			return fmt.Errorf("unsupported wire type %d", wt)
		}
	}
	return nil
}

func eachVarint(b []byte, f func(uint64)) error {
	for len(b) > 0 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("bad packed varint")
		}
		f(v)
		b = b[n:]
	}
	return nil
}

// FuncShare is one function's share of the profile.
type FuncShare struct {
	Name  string  `json:"name"`
	Flat  float64 `json:"flat_pct"` // as the leaf
	Cum   float64 `json:"cum_pct"`  // anywhere on the stack
	Value int64   `json:"-"`
}

// Top returns the n functions with the most cumulative time, and the n
// with the most flat time.
func (p *Profile) Top(n int) (cum, flat []FuncShare) {
	flatV, cumV := map[string]int64{}, map[string]int64{}
	for _, s := range p.Samples {
		if len(s.Stack) == 0 {
			continue
		}
		flatV[s.Stack[len(s.Stack)-1]] += s.Value
		seen := map[string]bool{}
		for _, f := range s.Stack {
			if !seen[f] {
				seen[f] = true
				cumV[f] += s.Value
			}
		}
	}
	mk := func(m map[string]int64, byFlat bool) []FuncShare {
		out := make([]FuncShare, 0, len(m))
		for name := range m {
			out = append(out, FuncShare{Name: name, Flat: p.pct(flatV[name]), Cum: p.pct(cumV[name]), Value: m[name]})
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Value != out[j].Value {
				return out[i].Value > out[j].Value
			}
			return out[i].Name < out[j].Name
		})
		if len(out) > n {
			out = out[:n]
		}
		return out
	}
	return mk(cumV, false), mk(flatV, true)
}

func (p *Profile) pct(v int64) float64 {
	if p.Total == 0 {
		return 0
	}
	return 100 * float64(v) / float64(p.Total)
}

// Share returns the percentage of the profile whose stacks contain a frame
// for which match is true.
func (p *Profile) Share(match func(frame string) bool) float64 {
	var v int64
	for _, s := range p.Samples {
		for _, f := range s.Stack {
			if match(f) {
				v += s.Value
				break
			}
		}
	}
	return p.pct(v)
}

// componentRules attribute a sample to the innermost frame that belongs
// to a known component (walking from the leaf toward the root), so a
// malloc, a syscall or a JSON encode is charged to the code that asked for
// it: the write(2) of a log line to logging, of a response to net/http.
var componentRules = []struct{ prefix, component string }{
	{"github.com/nats-io/nats-server/", "nats-server (embedded JetStream: store, dedup, routing)"},
	{"github.com/nats-io/nats.go", "nats.go client (publish, ack wait)"},
	{"log/slog.", "logging (slog)"},
	{"github.com/prometheus/", "prometheus metrics"},
	{"github.com/hookgate/hookgate/jetstream.(*AuditWriter)", "hookgate audit writer (records packed per subject)"},
	{"github.com/hookgate/hookgate/gateway.(*hmacScheme)", "hookgate signature verify"},
	{"github.com/hookgate/hookgate/gateway.(*standardScheme)", "hookgate signature verify"},
	{"github.com/hookgate/hookgate/gateway.schemeBodyMAC", "hookgate signature verify"},
	{"github.com/hookgate/hookgate/gateway.standardMAC", "hookgate signature verify"},
	{"github.com/hookgate/hookgate/gateway.", "hookgate gateway (JSON, key, headers, answer)"},
	{"github.com/hookgate/hookgate/", "hookgate other"},
	{"github.com/gorilla/mux", "gorilla/mux routing"},
	{"net/http.", "net/http server (incl. socket I/O)"},
}

// Components splits the profile by component (see componentRules);
// samples with no known frame are runtime: GC when a GC worker is on the
// stack, else scheduler and other.
func (p *Profile) Components() []FuncShare {
	v := map[string]int64{}
	for _, s := range p.Samples {
		comp := ""
	walk:
		for i := len(s.Stack) - 1; i >= 0; i-- {
			for _, r := range componentRules {
				if strings.HasPrefix(s.Stack[i], r.prefix) {
					comp = r.component
					break walk
				}
			}
		}
		if comp == "" {
			comp = "runtime: scheduler and other"
			for _, f := range s.Stack {
				if strings.HasPrefix(f, "runtime.gcBgMarkWorker") || strings.HasPrefix(f, "runtime.bgsweep") || strings.HasPrefix(f, "runtime.bgscavenge") {
					comp = "runtime: GC background"
					break
				}
			}
		}
		v[comp] += s.Value
	}
	out := make([]FuncShare, 0, len(v))
	for name, val := range v {
		out = append(out, FuncShare{Name: name, Flat: p.pct(val), Value: val})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value > out[j].Value })
	return out
}
