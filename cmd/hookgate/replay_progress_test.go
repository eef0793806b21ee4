//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// openPty opens a pseudo-terminal: the replay writes to its terminal end
// (a character device, as an operator's stderr is), the test reads what
// the terminal shows from the other.
func openPty(t *testing.T) (term *os.File, shown func() string) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		ptmx.Close()
		t.Skipf("no pseudo-terminal here: TIOCGPTN: %v", e)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		ptmx.Close()
		t.Skipf("no pseudo-terminal here: TIOCSPTLCK: %v", e)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	// Read all along: a terminal's buffer is small, and a writer to a full
	// one blocks.
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			k, err := ptmx.Read(b)
			mu.Lock()
			buf.Write(b[:k])
			mu.Unlock()
			if err != nil { // EIO once the terminal end is closed
				return
			}
		}
	}()
	closed := false
	t.Cleanup(func() {
		if !closed {
			term.Close()
		}
		<-done
		ptmx.Close()
	})
	return term, func() string {
		// Everything written is read once the terminal end is closed.
		if !closed {
			closed = true
			term.Close()
			<-done
		}
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

// With --subject the progress bar counts every event read, those passed
// over included: it counted only the subject's, against a total of all
// events read, and ended at e.g. 100/3900, looking stalled.
func TestReplaySubjectProgressCountsEveryEventRead(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := review7Config(t, dataDir, natsAddr, "", "")
	s := review7Start(t, cfg, true)
	for i, grant := range []string{"G-1", "G-2", "G-3"} {
		if code := review6Post(t, s.base, fmt.Sprintf(`{"id":"e%d","grant_id":%q,"at":"2026-11-30T11:00:00Z"}`, i, grant)); code != 200 {
			t.Fatalf("post: %d", code)
		}
	}
	term, shown := openPty(t)
	var out bytes.Buffer
	err := run(t.Context(), []string{"replay", "--dry-run", "--subject", "G-2", "--config", cfg}, func(string) string { return "" }, strings.NewReader(""), &out, term)
	bar := shown()
	if err != nil || !strings.Contains(out.String(), "dry run, nothing changed: 1 events") {
		t.Fatalf("replay --subject G-2: %v\n%s%s", err, out.String(), bar)
	}
	if !strings.Contains(bar, "] 3/3") {
		t.Errorf("the progress bar on the terminal did not reach 3/3 (3 events read, 1 of subject G-2):\n%q", bar)
	}
}

// screen is what a terminal shows of out: each \r goes back to the start
// of the row, written bytes replace what was there, trailing spaces are
// not seen.
func screen(out string) []string {
	var rows []string
	var row []byte
	col := 0
	for i := 0; i < len(out); i++ {
		switch c := out[i]; c {
		case '\r':
			col = 0
		case '\n':
			rows = append(rows, strings.TrimRight(string(row), " "))
			row, col = row[:0], 0
		default:
			if col < len(row) {
				row[col] = c
			} else {
				row = append(row, c)
			}
			col++
		}
	}
	if len(row) > 0 {
		rows = append(rows, strings.TrimRight(string(row), " "))
	}
	return rows
}

// With the lines and the progress bar on one terminal (an operator's
// replay, neither redirected), the lines, printed as events are decided,
// do not land on the bar's row: the bar is taken off before each line and
// drawn again after it, and ends below the last line.
func TestReplayLinesAndBarShareATerminal(t *testing.T) {
	dataDir, natsAddr := t.TempDir(), freeAddr(t)
	cfg := review7Config(t, dataDir, natsAddr, "", "")
	s := review7Start(t, cfg, true)
	for i := range 3 {
		if code := review6Post(t, s.base, fmt.Sprintf(`{"id":"e%d","grant_id":"G-%d","at":"2026-11-30T11:00:00Z"}`, i, i)); code != 200 {
			t.Fatalf("post: %d", code)
		}
	}
	term, shown := openPty(t)
	err := run(t.Context(), []string{"replay", "--dry-run", "--config", cfg}, func(string) string { return "" }, strings.NewReader(""), term, term)
	rows := screen(shown())
	want := []string{
		"SEQ  KEY               DECISION         REASON",
		"1    p:default:evt:e0  apply",
		"2    p:default:evt:e1  apply",
		"3    p:default:evt:e2  apply",
		"[" + strings.Repeat("#", 30) + "] 3/3",
		"dry run, nothing changed: 3 events: 3 apply",
	}
	if err != nil || strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("replay --dry-run (%v): the terminal shows\n%s\nwant\n%s", err, strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
