package localcp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// Down stops the hub running in dir: SIGTERM to the hub process, which
// stops its children in order; SIGKILL if it has not exited after timeout;
// then any child left behind is reaped. It returns ErrNotRunning when no
// hub runs there.
func Down(ctx context.Context, dir string, timeout time.Duration) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if !Running(dir) {
		// A hub that was SIGKILLed may have left children behind if the
		// parent-death signal was lost; reap them anyway.
		_ = reapStale(filepath.Join(dir, "run"), dir)
		return ErrNotRunning
	}
	st, err := ReadState(dir)
	if err != nil || st.PID == 0 {
		return fmt.Errorf("a hub holds %s but its pid is unknown: %v", lockPath(dir), err)
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling hub pid %d: %w", st.PID, err)
	}
	if !waitUnlocked(ctx, dir, timeout) {
		_ = syscall.Kill(st.PID, syscall.SIGKILL)
		if !waitUnlocked(ctx, dir, 10*time.Second) {
			return fmt.Errorf("hub pid %d did not stop", st.PID)
		}
	}
	return reapStale(filepath.Join(dir, "run"), dir)
}

func waitUnlocked(ctx context.Context, dir string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !Running(dir) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return !Running(dir)
}

// Status describes the hub in a directory.
type Status struct {
	Dir        string
	Running    bool
	State      State
	Kubeconfig string
}

// GetStatus reads the status of the hub in dir.
func GetStatus(dir string) (Status, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Status{}, err
	}
	s := Status{Dir: dir, Running: Running(dir), Kubeconfig: KubeconfigPath(dir)}
	s.State, err = ReadState(dir)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return s, err
	}
	if !s.Running {
		s.State.Phase, s.State.PID = PhaseStopped, 0
	}
	return s, nil
}

// WaitReady waits until the hub in dir is Ready or timeout passes. A hub
// started in the background may not hold its directory yet, so a stopped
// hub is waited for too.
func WaitReady(ctx context.Context, dir string, timeout time.Duration) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		s, err := GetStatus(dir)
		if err == nil && s.Running && s.State.Phase == PhaseReady {
			return s, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("hub in %s is %s", s.Dir, s.State.Phase)
			}
			return s, fmt.Errorf("waiting for the hub: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
