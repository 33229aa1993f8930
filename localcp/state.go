package localcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/metalshift/metalshift/internal/ports"
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
	// Console is the web console (https).
	Console int `json:"console,omitempty"`
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

// reservePorts reserves the hub's ports (internal/ports) and holds them
// until release: the reservations are kept by the hub process for its
// lifetime, while its children and its manager listen on the ports. It
// keeps the ports of the previous run where they can still be had, so that
// kubeconfigs keep working across restarts, and picks others below the
// kernel's ephemeral range otherwise: etcd and kube-apiserver are told a
// port number, and a port merely seen free could be taken by anything on
// the machine before they bind it; a reserved one cannot (see
// internal/ports). A previous port is kept wherever it is, even in the
// ephemeral range (hubs from before reservations picked theirs there):
// locked and seen free, it only races with the kernel handing it out
// before the child binds it, which a kubeconfig that keeps working is
// worth.
func reservePorts(prev Ports) (Ports, func(), error) {
	var (
		p    Ports
		held []*ports.Reservation
	)
	release := func() {
		for _, r := range held {
			r.Release()
		}
	}
	for _, f := range []struct {
		dst  *int
		want int
	}{{&p.EtcdClient, prev.EtcdClient}, {&p.EtcdPeer, prev.EtcdPeer}, {&p.APIServer, prev.APIServer}, {&p.Webhook, prev.Webhook}, {&p.ControllerManager, prev.ControllerManager}, {&p.Deploy, prev.Deploy}, {&p.Ignition, prev.Ignition},
		{&p.AgentService, prev.AgentService}, {&p.DeployBoot, prev.DeployBoot}, {&p.Console, prev.Console}} {
		r, err := ports.Reserve(f.want)
		if err != nil {
			release()
			return Ports{}, nil, err
		}
		held = append(held, r)
		*f.dst = r.Port
	}
	return p, release, nil
}
