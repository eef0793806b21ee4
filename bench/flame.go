package bench

import (
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"sort"
	"strings"
)

// flameNode is one frame in the merged call tree.
type flameNode struct {
	name     string
	value    int64
	children map[string]*flameNode
}

func (n *flameNode) child(name string) *flameNode {
	if n.children == nil {
		n.children = map[string]*flameNode{}
	}
	c := n.children[name]
	if c == nil {
		c = &flameNode{name: name}
		n.children[name] = c
	}
	return c
}

// WriteFlameGraph renders p as an SVG flame graph (root at the bottom,
// width = share of CPU time, children sorted by name as in Brendan Gregg's
// flamegraph.pl), coloured by component: hookgate green, nats-server
// blue, nats.go cyan, net/http orange, runtime grey, others yellow. Frames
// narrower than minPct of the total are dropped. Each frame has a title
// tooltip with its name and share.
func WriteFlameGraph(w io.Writer, p *Profile, title string, minPct float64) error {
	root := &flameNode{name: "all"}
	for _, s := range p.Samples {
		root.value += s.Value
		n := root
		for _, f := range s.Stack {
			n = n.child(f)
			n.value += s.Value
		}
	}
	const (
		width    = 1400.0
		frameH   = 17.0
		pad      = 10.0
		topSpace = 50.0
	)
	depth := 0
	var measure func(n *flameNode, d int)
	measure = func(n *flameNode, d int) {
		if root.value == 0 || 100*float64(n.value)/float64(root.value) < minPct {
			return
		}
		depth = max(depth, d)
		for _, c := range n.children {
			measure(c, d+1)
		}
	}
	measure(root, 0)
	height := topSpace + float64(depth+1)*frameH + 2*pad
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Verdana, sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fdfdf6"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="16" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%.0f" y="40" font-size="11" text-anchor="middle" fill="#555">width = share of CPU time; hover for names. green hookgate, blue nats-server, cyan nats.go, orange net/http, grey Go runtime</text>`+"\n", width/2)
	scale := (width - 2*pad) / float64(max(root.value, 1))
	var draw func(n *flameNode, x float64, d int)
	draw = func(n *flameNode, x float64, d int) {
		pct := 100 * float64(n.value) / float64(max(root.value, 1))
		if pct < minPct {
			return
		}
		w := float64(n.value) * scale
		y := height - pad - float64(d+1)*frameH
		label := fmt.Sprintf("%s (%.2f%%)", n.name, pct)
		fmt.Fprintf(&b, `<g><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" rx="2"/>`,
			html.EscapeString(label), x, y, max(w-0.5, 0.1), frameH-1, frameColor(n.name))
		if chars := int(w / 6.6); chars >= 4 {
			text := shortName(n.name)
			if len(text) > chars {
				text = text[:chars-2] + ".."
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, x+3, y+frameH-5, html.EscapeString(text))
		}
		b.WriteString("</g>\n")
		names := make([]string, 0, len(n.children))
		for k := range n.children {
			names = append(names, k)
		}
		sort.Strings(names)
		cx := x
		for _, k := range names {
			c := n.children[k]
			draw(c, cx, d+1)
			cx += float64(c.value) * scale
		}
	}
	draw(root, pad, 0)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// shortName drops the module path: "github.com/nats-io/nats-server/v2/server.(*stream).processJetStreamMsg"
// becomes "server.(*stream).processJetStreamMsg".
func shortName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

func frameColor(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	v := int(h.Sum32() % 40)
	switch {
	case strings.HasPrefix(name, "github.com/hookgate/"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 80+v, 190+v/2, 80+v)
	case strings.HasPrefix(name, "github.com/nats-io/nats-server"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 90+v, 130+v, 225)
	case strings.HasPrefix(name, "github.com/nats-io/"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 80+v, 200+v/2, 210)
	case strings.HasPrefix(name, "net/http") || strings.HasPrefix(name, "net.") || strings.HasPrefix(name, "bufio."):
		return fmt.Sprintf("rgb(%d,%d,%d)", 240, 150+v, 60+v)
	case strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "internal/runtime") || name == "all":
		return fmt.Sprintf("rgb(%d,%d,%d)", 180+v, 180+v, 180+v)
	}
	return fmt.Sprintf("rgb(%d,%d,%d)", 230, 200+v/2, 80+v)
}
