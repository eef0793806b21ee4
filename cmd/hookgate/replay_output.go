package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hookgate/hookgate/consumer"
)

// What replay prints as it goes: its lines on stdout, its progress bar on
// a terminal's stderr.

// progress draws "N/M" on a terminal's stderr; quiet otherwise.
type progress struct {
	w   io.Writer
	tty bool
	// shared: the lines go to a terminal too (most likely the same one),
	// so the bar is cleared before each line, or the line would follow
	// it on its row, and drawn again after it.
	shared bool
	n      uint64
	drawn  int // the length of the bar on the terminal now; 0: none
}

func newProgress(w, lines io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w), shared: isTerminal(w) && isTerminal(lines)}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) step(total uint64) {
	p.n++
	if !p.tty || (p.drawn > 0 && p.n%100 != 0 && p.n != total) {
		return
	}
	const width = 30
	filled := 0
	if total > 0 {
		filled = int(min(p.n, total) * width / total)
	}
	bar := fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.n, total)
	fmt.Fprint(p.w, "\r"+bar)
	p.drawn = len(bar)
}

// clear takes the bar off a terminal the lines are printed on too.
func (p *progress) clear() {
	if p.shared && p.drawn > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.drawn)+"\r")
		p.drawn = 0
	}
}

// note prints line s on the bar's writer, taking the bar off first; the
// next step draws it again.
func (p *progress) note(s string) {
	if p.tty && p.drawn > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.drawn)+"\r")
		p.drawn = 0
	}
	fmt.Fprintln(p.w, s)
}

func (p *progress) done() {
	if p.drawn > 0 {
		fmt.Fprintln(p.w)
	}
}

// replayRows prints replay's table a line at a time, each as soon as its
// event is decided. text/tabwriter, used before, aligns a table only once
// it has all of it: a 3000-event replay printed nothing for 58 s, and one
// killed (kill -9) part way left stdout empty, though it had applied and
// forwarded 404 events. Here each column is as wide as its widest cell so
// far (SEQ fitted to the last sequence the read may reach, DECISION to
// its longest word, from the first line), so a longer key moves the REASON column of the lines
// after it, never of those printed. Trailing spaces are cut, as newTable
// does (review AE).
type replayRows struct {
	w      io.Writer
	before func() // called before each line is printed
	widths [3]int // SEQ, KEY, DECISION; REASON, the last, is not padded
	headed bool
}

var replayColumns = [4]string{"SEQ", "KEY", "DECISION", "REASON"}

// newReplayRows prints to w, calling before ahead of each line (nil:
// nothing).
func newReplayRows(w io.Writer, before func()) *replayRows {
	r := &replayRows{w: w, before: before}
	for i := range r.widths {
		r.widths[i] = len(replayColumns[i])
	}
	r.widths[2] = max(r.widths[2], len(consumer.AlreadyApplied))
	return r
}

// fitSeq widens SEQ for sequence seq.
func (r *replayRows) fitSeq(seq uint64) {
	r.widths[0] = max(r.widths[0], len(strconv.FormatUint(seq, 10)))
}

// row prints one event's line, and the header before the first.
func (r *replayRows) row(seq uint64, key, decision, reason string) {
	cells := [4]string{strconv.FormatUint(seq, 10), key, decision, reason}
	for i := range r.widths {
		r.widths[i] = max(r.widths[i], utf8.RuneCountInString(cells[i]))
	}
	if r.before != nil {
		r.before()
	}
	out := ""
	if !r.headed {
		r.headed = true
		out = r.line(replayColumns)
	}
	// One write for the line (and the header before the first): it is on
	// stdout whole once its event is decided.
	_, _ = io.WriteString(r.w, out+r.line(cells))
}

// line is cells as a line of the table.
func (r *replayRows) line(cells [4]string) string {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(r.widths) {
			b.WriteString(strings.Repeat(" ", r.widths[i]-utf8.RuneCountInString(c)+2))
		}
	}
	return strings.TrimRight(b.String(), " ") + "\n"
}

// end prints the header when no line was printed.
func (r *replayRows) end() {
	if !r.headed {
		r.headed = true
		_, _ = io.WriteString(r.w, strings.Join(replayColumns[:], "  ")+"\n")
	}
}
