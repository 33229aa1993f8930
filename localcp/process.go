package localcp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// defaultStopTimeout is how long a child gets to exit after SIGTERM before
// SIGKILL, unless its process sets its own.
const defaultStopTimeout = 20 * time.Second

// process is one child of the hub. Its pid is recorded under <dir>/run so
// that the next start can reap it if this hub died without stopping it.
type process struct {
	name string
	path string
	args []string
	// env is added to the hub's environment.
	env     []string
	runDir  string
	logPath string
	// stopTimeout overrides defaultStopTimeout.
	stopTimeout time.Duration

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *process) pidFile() string { return filepath.Join(p.runDir, p.name+".pid") }

// start starts the child with its output appended to its log file. The child
// gets SIGKILL if the hub process dies, and lives in its own process group
// so that a terminal's Ctrl-C reaches only the hub, which stops it in order.
func (p *process) start() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n==== %s: starting %s\n", time.Now().Format(time.RFC3339), p.name)

	p.cmd = exec.Command(p.path, p.args...)
	if len(p.env) > 0 {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := Spawn(p.cmd); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	if err := os.WriteFile(p.pidFile(), []byte(strconv.Itoa(p.cmd.Process.Pid)), 0o600); err != nil {
		_ = p.cmd.Process.Kill()
		return err
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return nil
}

// exited reports whether the child has exited, and with what.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to its stop timeout, then sends SIGKILL. It
// is safe to call on a process that was never started or already exited.
func (p *process) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	timeout := p.stopTimeout
	if timeout == 0 {
		timeout = defaultStopTimeout
	}
	if done, _ := p.exited(); !done {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(timeout):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	_ = os.Remove(p.pidFile())
}

// logTail returns the last lines of the child's log, to explain a failure.
func (p *process) logTail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// reapStale kills children recorded under runDir by a hub that died without
// stopping them. A pid is only killed when its command line still names
// dir, so a recycled pid of an unrelated process is left alone.
func reapStale(runDir, dir string) error {
	files, err := filepath.Glob(filepath.Join(runDir, "*.pid"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err == nil && pid > 0 && cmdlineMentions(pid, dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 10*time.Second)
		}
		_ = os.Remove(f)
	}
	return nil
}

// cmdlineMentions reports whether the live process pid has s in its
// command line.
func cmdlineMentions(pid int, s string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(data, []byte(s))
}

// Alive reports whether pid names a running process (not a zombie).
func Alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	return data[i+2] != 'Z' && data[i+2] != 'X'
}

func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !Alive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !Alive(pid)
}

// errNotFound is returned by findBinary.
var errNotFound = errors.New("not found")

// findBinary looks for name in binDir, $METALSHIFT_BIN_DIR,
// $KUBEBUILDER_ASSETS, next to the running executable, ./bin and $PATH.
func findBinary(binDir, name string) (string, error) {
	var dirs []string
	for _, d := range []string{binDir, os.Getenv("METALSHIFT_BIN_DIR"), os.Getenv("KUBEBUILDER_ASSETS")} {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	dirs = append(dirs, "bin")
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s %w (looked in %s and $PATH): run `make tools` or pass --bin-dir", name, errNotFound, strings.Join(dirs, ", "))
}

// The parent-death signal fires when the OS thread that forked the child
// exits, not when the process does. Children are therefore forked from one
// goroutine locked to a thread that lives as long as the process.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// Spawn starts cmd from that thread: a cmd with Pdeathsig is signalled
// when this process exits, not before.
func Spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for req := range spawnReqs {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
