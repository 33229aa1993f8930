package localcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// State is what a hub records in <dir>/hub.json for `hub status`,
// `hub down` and its next start.
type State struct {
	// PID is the process running the hub, 0 once it stopped.
	PID int `json:"pid"`
	// Phase is Starting, Ready or Stopped.
	Phase string `json:"phase"`
	// Ports are the loopback ports of the hub's listeners, reused on resume.
	Ports Ports `json:"ports"`
	// Server is the URL of the kube-apiserver.
	Server string `json:"server,omitempty"`
	// Since is when Phase was last set.
	Since time.Time `json:"since"`
}

// Hub phases.
const (
	PhaseStarting = "Starting"
	PhaseReady    = "Ready"
	PhaseStopped  = "Stopped"
)

// Ports are the loopback ports a hub listens on.
type Ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
	Webhook    int `json:"webhook"`
	// ControllerManager serves kube-controller-manager's health endpoint.
	ControllerManager int `json:"controllerManager"`
	// Deploy is the host engine's deploy server (images, agent API).
	Deploy int `json:"deploy"`
	// DeployBoot is the deploy server's plain http for network-booting
	// firmware (boot scripts by MAC, kernel, initrds).
	DeployBoot int `json:"deployBoot,omitempty"`
	// Ignition serves Ignition configs too large for user data.
	Ignition int `json:"ignition"`
	// AgentService is the agent-based install's service (discovery
	// images, the agents' REST API).
	AgentService int `json:"agentService"`
}

// ErrAlreadyRunning is returned when a hub already runs in the directory.
var ErrAlreadyRunning = errors.New("a hub is already running in this directory")

// ErrNotRunning is returned when no hub runs in the directory.
var ErrNotRunning = errors.New("no hub is running in this directory")

func statePath(dir string) string { return filepath.Join(dir, "hub.json") }
func lockPath(dir string) string  { return filepath.Join(dir, "hub.lock") }

// ReadState reads the state a hub recorded in dir.
func ReadState(dir string) (State, error) {
	var s State
	data, err := os.ReadFile(statePath(dir))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(data, &s)
}

func writeState(dir string, s State) error {
	s.Since = time.Now().UTC().Truncate(time.Second)
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(dir))
}

// lock takes the exclusive lock of dir, trying for up to patience. The
// kernel drops it when the hub process exits, however it exits, so a stale
// lock cannot exist.
func lock(dir string, patience time.Duration) (*os.File, error) {
	f, err := os.OpenFile(lockPath(dir), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(patience)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return f, nil
		case !errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", lockPath(dir), err)
		case time.Now().After(deadline):
			f.Close()
			return nil, ErrAlreadyRunning
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startLockPatience covers Running's probes: they hold the lock for an
// instant, and a hub starting during one must not take it for another hub.
const startLockPatience = 500 * time.Millisecond

// Running reports whether a hub holds the lock of dir.
func Running(dir string) bool {
	f, err := lock(dir, 0)
	if err != nil {
		return errors.Is(err, ErrAlreadyRunning)
	}
	f.Close()
	return false
}

// choosePorts keeps the ports of the previous run where they are still free,
// so that kubeconfigs keep working across restarts, and picks free ones
// otherwise. Ports already chosen are not handed out twice.
func choosePorts(prev Ports) (Ports, error) {
	taken := map[int]bool{}
	pick := func(want int) (int, error) {
		if want != 0 && !taken[want] && portFree(want) {
			taken[want] = true
			return want, nil
		}
		for range 20 {
			p, err := freePort()
			if err != nil {
				return 0, err
			}
			if !taken[p] {
				taken[p] = true
				return p, nil
			}
		}
		return 0, errors.New("no free loopback port")
	}
	var (
		p   Ports
		err error
	)
	for _, f := range []struct {
		dst  *int
		want int
	}{{&p.EtcdClient, prev.EtcdClient}, {&p.EtcdPeer, prev.EtcdPeer}, {&p.APIServer, prev.APIServer}, {&p.Webhook, prev.Webhook}, {&p.ControllerManager, prev.ControllerManager}, {&p.Deploy, prev.Deploy}, {&p.Ignition, prev.Ignition},
		{&p.AgentService, prev.AgentService}, {&p.DeployBoot, prev.DeployBoot}} {
		if *f.dst, err = pick(f.want); err != nil {
			return p, err
		}
	}
	return p, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
