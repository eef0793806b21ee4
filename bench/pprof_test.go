package bench

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
)

var sink [][]byte

//go:noinline
func allocateForProfile() {
	for range 2000 {
		sink = append(sink, make([]byte, 4096))
	}
}

// TestParseProfile decodes a real profile written by runtime/pprof (a
// heap profile: deterministic, unlike a short CPU profile) and renders it.
func TestParseProfile(t *testing.T) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	allocateForProfile()
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
		t.Fatal(err)
	}
	sink = nil
	p, err := ParseProfile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if p.Unit != "bytes" || len(p.Samples) == 0 || p.Total <= 0 {
		t.Fatalf("unit %q, %d samples, total %d", p.Unit, len(p.Samples), p.Total)
	}
	var found bool
	for _, s := range p.Samples {
		for i, f := range s.Stack {
			if strings.HasSuffix(f, "bench.allocateForProfile") {
				found = true
				if i == 0 || !strings.Contains(strings.Join(s.Stack[:i], " "), "TestParseProfile") {
					t.Errorf("stack not root first: %v", s.Stack)
				}
			}
		}
	}
	if !found {
		t.Fatal("no sample in allocateForProfile")
	}
	cum, flat := p.Top(5)
	if len(cum) == 0 || len(flat) == 0 || cum[0].Cum < flat[0].Flat {
		t.Errorf("top: cum %v flat %v", cum, flat)
	}
	var svg bytes.Buffer
	if err := WriteFlameGraph(&svg, p, "test <profile>", 0.1); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(svg.String(), "<svg") || !strings.Contains(svg.String(), "allocateForProfile") || strings.Contains(svg.String(), "<profile>") {
		t.Errorf("flame graph SVG lacks the frame or does not escape: %.200s", svg.String())
	}
}
