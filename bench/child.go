package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ChildEnv marks a process started by the harness as one of its children
// (the floor, the key counter): a test binary dispatches on it.
const ChildEnv = "HOOKGATE_BENCH_CHILD"

// Child is a server under test in a process of its own, so its memory and
// CPU are its own (read from /proc) and a crash cannot take the harness
// down with it.
type Child struct {
	cmd     *exec.Cmd
	Addr    string // host:port of its HTTP listener
	log     *os.File
	logPath string
	done    chan struct{}
	// copied is closed once everything the child wrote on stdout is in
	// the log (the pipe's end: the child and whatever it started closed
	// it).
	copied chan struct{}
	mu     sync.Mutex
	lines  []string // stdout lines after the listening line
}

// StartChild runs argv with the extra env, its stdout and stderr going to
// logPath, waits for the stdout line starting with listenPrefix (followed
// by http://ADDR) and then for GET /readyz to answer 200.
func StartChild(ctx context.Context, argv, env []string, logPath, listenPrefix string, timeout time.Duration) (*Child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), ChildEnv+"=1"), env...)
	cmd.Stderr = logf
	// A pipe of our own, not StdoutPipe: Wait closes that one as soon as
	// the child exits, and the line it printed as it stopped (the floor's
	// write failures) was lost in 10-74 of 100 stops (review X).
	stdout, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd.Stdout = pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		stdout.Close()
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	c := &Child{cmd: cmd, log: logf, logPath: logPath, done: make(chan struct{}), copied: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(c.copied)
		defer stdout.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if rest, ok := strings.CutPrefix(line, listenPrefix); ok {
				select {
				case addr <- strings.TrimPrefix(strings.TrimPrefix(rest, "http://"), "https://"):
				default:
				}
				continue
			}
			c.mu.Lock()
			c.lines = append(c.lines, line)
			c.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(c.done) }()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case c.Addr = <-addr:
	case <-c.done:
		return nil, fmt.Errorf("%s exited before listening:\n%s", argv[0], c.LogTail(20))
	case <-deadline.C:
		c.Kill()
		return nil, fmt.Errorf("%s not listening after %s:\n%s", argv[0], timeout, c.LogTail(20))
	case <-ctx.Done():
		c.Kill()
		return nil, ctx.Err()
	}
	for {
		resp, err := http.Get("http://" + c.Addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("%s exited before ready:\n%s", argv[0], c.LogTail(20))
		case <-deadline.C:
			c.Kill()
			return nil, fmt.Errorf("%s not ready after %s:\n%s", argv[0], timeout, c.LogTail(20))
		case <-ctx.Done():
			c.Kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Stop asks the child to finish (SIGTERM) and kills it after timeout.
func (c *Child) Stop(timeout time.Duration) error {
	defer c.closeLog()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("did not stop after SIGTERM; killed")
	}
}

// Kill ends the child at once.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
	c.closeLog()
}

// closeLog closes the log once the child's last stdout line is in it (a
// process it started and left running, holding the pipe, is not waited
// for beyond a few seconds).
func (c *Child) closeLog() {
	select {
	case <-c.copied:
	case <-time.After(5 * time.Second):
	}
	c.log.Close()
}

// LogTail returns the last n lines the child wrote.
func (c *Child) LogTail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
