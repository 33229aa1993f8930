package localcp

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// ChildOptions describe a process started with StartChild.
type ChildOptions struct {
	// Name is the binary (found like the hub's: BinDir, $METALSHIFT_BIN_DIR,
	// $KUBEBUILDER_ASSETS, next to metalshift, ./bin, $PATH).
	Name   string
	BinDir string
	Args   []string
	// Env is added to this process's environment.
	Env []string
	// Dir receives <id>.pid and <id>.log; ID defaults to Name.
	Dir string
	ID  string
	// Ready is polled until it succeeds; nil means started is ready.
	Ready func(context.Context) error
	// Timeout bounds the wait for Ready; 0 means 2 minutes.
	Timeout time.Duration
	// StopTimeout is how long the child gets after SIGTERM; 0 means 20s.
	StopTimeout time.Duration
}

// Child is a process started by StartChild, handled like the hub's own
// children: its own process group, killed if this process dies, output
// in a log file.
type Child struct{ p *process }

// StartChild starts a process and waits until it is ready. On error
// nothing is left running.
func StartChild(ctx context.Context, o ChildOptions) (*Child, error) {
	path, err := findBinary(o.BinDir, o.Name)
	if err != nil {
		return nil, err
	}
	id := o.ID
	if id == "" {
		id = o.Name
	}
	p := &process{name: id, path: path, args: o.Args, env: o.Env, runDir: o.Dir, logPath: filepath.Join(o.Dir, id+".log"), stopTimeout: o.StopTimeout}
	if err := p.start(); err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if err := waitReady(ctx, p, o.Ready, timeout); err != nil {
		p.stop()
		return nil, err
	}
	return &Child{p: p}, nil
}

// Stop stops the child (SIGTERM, then SIGKILL after its stop timeout).
func (c *Child) Stop() { c.p.stop() }

// LogPath is the child's log file.
func (c *Child) LogPath() string { return c.p.logPath }

// Done is closed when the child exits.
func (c *Child) Done() <-chan struct{} { return c.p.done }

// waitReady polls ready until it succeeds, p exits, or timeout passes.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error, timeout time.Duration) error {
	if ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited during start (%v); last lines of %s:\n%s", p.name, err, p.logPath, p.logTail(15))
		}
		if lastErr = ready(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not become ready in %s: %v; see %s", p.name, timeout, lastErr, p.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
