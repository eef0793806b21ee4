package main

import (
	"bytes"
	"io"
	"text/tabwriter"
)

// newTable is the commands' table writer: columns two spaces apart, and no
// trailing spaces on a row whose last cells are empty (a replay or dlq
// replay line without a reason ended in its column's padding; review AE).
// Every row must end in a newline.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(&trimLines{w: w}, 0, 4, 2, ' ', 0)
}

// trimLines writes each line it is given without its trailing spaces,
// once the line is complete.
type trimLines struct {
	w    io.Writer
	line []byte
}

func (t *trimLines) Write(p []byte) (int, error) {
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.line = append(t.line, p...)
			return n, nil
		}
		t.line = append(bytes.TrimRight(append(t.line, p[:i]...), " "), '\n')
		if _, err := t.w.Write(t.line); err != nil {
			return 0, err
		}
		t.line, p = t.line[:0], p[i+1:]
	}
}
