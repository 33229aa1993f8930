package redfish

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	rf "github.com/metalshift/metalshift/hostengine/pkg/redfish"
)

// Driver drives one machine over Redfish. Operations a BMC runs in the
// background (a Redfish task) return Dirty; the next call of the same
// operation polls the task once and goes on from the step that started it.
type Driver struct {
	addr   provisioner.Address
	client *rf.Client
	poll   time.Duration
	// taskTimeout is how long a BMC task may run; clock measures it.
	taskTimeout time.Duration
	clock       clock.PassiveClock

	mu         sync.Mutex
	systemPath string
	// task is the BMC task this driver started and has not seen end. It is
	// a cache of what the BMC knows: a restarted engine that lost it
	// starts the operation again, and every step but the last restart
	// finds its work done on the BMC.
	task *pendingTask
}

// pendingTask is a running BMC task: the operation and step that started
// it, and when.
type pendingTask struct {
	op, step, monitor string
	started           time.Time
}

// DefaultTaskTimeout is how long a BMC task (a power action, a virtual
// media insert the BMC runs in the background) may run before the
// operation that started it fails. A BMC finishes a power action within
// seconds to a minute or two; a task still Running after this long is
// stuck (it would otherwise be polled for ever, and hold up every other
// operation of the host, which waits for it).
const DefaultTaskTimeout = 5 * time.Minute

var _ provisioner.Provisioner = &Driver{}

// Options tune the driver.
type Options struct {
	// Timeout bounds each request; 0 means 30 seconds.
	Timeout time.Duration
	// TaskPollInterval is how soon an operation waiting for a BMC task is
	// called again; 0 means 1 second.
	TaskPollInterval time.Duration
	// TaskTimeout bounds each BMC task; 0 means DefaultTaskTimeout.
	TaskTimeout time.Duration
	// Clock measures TaskTimeout; nil means the real clock.
	Clock clock.PassiveClock
	// Egress is where connections to the BMC may go.
	Egress egress.Policy
}

// New returns a driver for a parsed Redfish address.
func New(addr provisioner.Address, insecure bool, creds provisioner.Credentials, opts Options) (*Driver, error) {
	c, err := rf.New(rf.Options{
		Endpoint: addr.Endpoint, Username: creds.Username, Password: creds.Password,
		InsecureSkipVerify: insecure, Timeout: opts.Timeout, Egress: opts.Egress,
	})
	if err != nil {
		return nil, err
	}
	if opts.TaskPollInterval == 0 {
		opts.TaskPollInterval = time.Second
	}
	if opts.TaskTimeout == 0 {
		opts.TaskTimeout = DefaultTaskTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Driver{addr: addr, client: c, systemPath: addr.SystemPath, poll: opts.TaskPollInterval,
		taskTimeout: opts.TaskTimeout, clock: opts.Clock}, nil
}

// await polls the task this driver started, if any, once. It returns
// running while the task runs, and the "op/step" that started a task that
// has just completed; a task that failed is an error, and so is one that
// still runs taskTimeout after it started: the driver forgets it, and the
// operation called again starts over (its steps are idempotent).
func (d *Driver) await(ctx context.Context) (finished string, running bool, err error) {
	d.mu.Lock()
	t := d.task
	d.mu.Unlock()
	if t == nil {
		return "", false, nil
	}
	running, err = d.client.Task(ctx, t.monitor)
	if running {
		if age := d.clock.Since(t.started); age >= d.taskTimeout {
			d.mu.Lock()
			d.task = nil
			d.mu.Unlock()
			return "", false, fmt.Errorf("%w: its task %s (%s, step %s) still runs %s after it started (the limit is %s): the operation starts over",
				provisioner.ErrTaskStuck, t.monitor, t.op, t.step, age.Truncate(time.Second), d.taskTimeout)
		}
		return "", true, nil
	}
	var he *rf.HTTPError
	if err != nil && errors.As(err, &he) && he.Status < 500 && he.Status != 401 && he.Status != 403 {
		// The BMC no longer knows the task (it forgets finished tasks):
		// start the operation over, its steps are idempotent.
		err = nil
		t = &pendingTask{}
	}
	if err != nil && errors.Is(translate(err), provisioner.ErrUnreachable) {
		return "", false, translate(err) // keep the task: poll it again later
	}
	d.mu.Lock()
	d.task = nil
	d.mu.Unlock()
	if err != nil {
		return "", false, translate(err)
	}
	return t.op + "/" + t.step, false, nil
}

// started records the task a step started, if the BMC answered with one.
func (d *Driver) started(op, step, monitor string) (provisioner.Result, bool) {
	if monitor == "" {
		return provisioner.Done, false
	}
	d.mu.Lock()
	d.task = &pendingTask{op: op, step: step, monitor: monitor, started: d.clock.Now()}
	d.mu.Unlock()
	return provisioner.InProgress(d.poll), true
}

// begin is the start of every operation: it waits for a running task (of
// this or another operation: one change at a time), and tells whether the
// task that just ended was this operation's last step.
func (d *Driver) begin(ctx context.Context, op string) (res provisioner.Result, finished bool, err error) {
	fin, running, err := d.await(ctx)
	switch {
	case err != nil:
		return provisioner.Done, false, err
	case running:
		return provisioner.InProgress(d.poll), false, nil
	}
	return provisioner.Done, fin == op+"/"+stepReset, nil
}

// stepReset is the last step of every operation: a ComputerSystem.Reset.
const stepReset = "reset"

// translate maps client errors to the provisioner's sentinels.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var netErr net.Error
	switch {
	case errors.Is(err, provisioner.ErrAddressRefused), errors.Is(err, rf.ErrOffOrigin), errors.Is(err, rf.ErrTooLarge):
		return err // the BMC's address or answers, not its reachability
	case errors.Is(err, rf.ErrUnauthorized):
		return fmt.Errorf("%w: %v", provisioner.ErrCredentials, err)
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	var he *rf.HTTPError
	if errors.As(err, &he) && he.Status >= 500 {
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	if strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "EOF") {
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	return err
}

// system resolves the system path, picking the only system when the
// address names none.
func (d *Driver) system(ctx context.Context) (string, error) {
	d.mu.Lock()
	p := d.systemPath
	d.mu.Unlock()
	if p != "" {
		return p, nil
	}
	paths, err := d.client.SystemPaths(ctx)
	if err != nil {
		return "", translate(err)
	}
	if len(paths) != 1 {
		return "", fmt.Errorf("the BMC has %d systems: name one in the address, e.g. .../redfish/v1/Systems/<id>", len(paths))
	}
	d.mu.Lock()
	d.systemPath = paths[0]
	d.mu.Unlock()
	return paths[0], nil
}

// Register reads the system, which needs working credentials.
func (d *Driver) Register(ctx context.Context) error {
	p, err := d.system(ctx)
	if err != nil {
		return err
	}
	_, _, err = d.client.System(ctx, p)
	return translate(err)
}

// PowerState reads PowerState.
func (d *Driver) PowerState(ctx context.Context) (bool, error) {
	p, err := d.system(ctx)
	if err != nil {
		return false, err
	}
	s, _, err := d.client.System(ctx, p)
	if err != nil {
		return false, translate(err)
	}
	return s.PowerState == "On" || s.PowerState == "PoweringOn", nil
}

func (d *Driver) setPower(ctx context.Context, on bool) (provisioner.Result, error) {
	op := map[bool]string{true: "power-on", false: "power-off"}[on]
	if res, finished, err := d.begin(ctx, op); err != nil || res.Dirty || finished {
		return res, err
	}
	current, err := d.PowerState(ctx)
	if err != nil || current == on {
		return provisioner.Done, err
	}
	p, _ := d.system(ctx)
	reset := rf.ResetForceOff
	if on {
		reset = rf.ResetOn
	}
	return d.reset(ctx, op, p, reset)
}

// reset runs the final Reset of op.
func (d *Driver) reset(ctx context.Context, op, systemPath, resetType string) (provisioner.Result, error) {
	monitor, err := d.client.Reset(ctx, systemPath, resetType)
	if err != nil {
		return provisioner.Done, translate(err)
	}
	res, _ := d.started(op, stepReset, monitor)
	return res, nil
}

// PowerOn powers the machine on.
func (d *Driver) PowerOn(ctx context.Context) (provisioner.Result, error) {
	return d.setPower(ctx, true)
}

// PowerOff powers the machine off, forcibly.
func (d *Driver) PowerOff(ctx context.Context) (provisioner.Result, error) {
	return d.setPower(ctx, false)
}

// Reboot restarts the machine, or powers it on when it is off.
func (d *Driver) Reboot(ctx context.Context, soft bool) (provisioner.Result, error) {
	if res, finished, err := d.begin(ctx, "reboot"); err != nil || res.Dirty || finished {
		return res, err
	}
	return d.restart(ctx, "reboot", soft)
}

// restart restarts the machine as the last step of op, or powers it on.
func (d *Driver) restart(ctx context.Context, op string, soft bool) (provisioner.Result, error) {
	on, err := d.PowerState(ctx)
	if err != nil {
		return provisioner.Done, err
	}
	p, _ := d.system(ctx)
	reset := rf.ResetOn
	switch {
	case on && soft:
		reset = rf.ResetGracefulRestart
	case on:
		reset = rf.ResetForceRestart
	}
	return d.reset(ctx, op, p, reset)
}

func bootMode(uefi bool) string {
	if uefi {
		return "UEFI"
	}
	return "Legacy"
}

// BootDeployImage attaches the deploy ISO (virtual media) or sets PXE, for
// one boot, and restarts the machine.
func (d *Driver) BootDeployImage(ctx context.Context, img provisioner.DeployImage, uefi bool) (provisioner.Result, error) {
	const op = "boot-deploy"
	if res, finished, err := d.begin(ctx, op); err != nil || res.Dirty || finished {
		return res, err
	}
	p, err := d.system(ctx)
	if err != nil {
		return provisioner.Done, err
	}
	target := "Pxe"
	if d.addr.VirtualMedia {
		target = "Cd"
		sys, _, err := d.client.System(ctx, p)
		if err != nil {
			return provisioner.Done, translate(err)
		}
		cd, err := d.client.CDPath(ctx, sys)
		if err != nil {
			return provisioner.Done, fmt.Errorf("%w: %v", provisioner.ErrMedia, err)
		}
		monitor, err := d.client.InsertMedia(ctx, cd, img.ISOURL)
		if err != nil {
			// An answer from the BMC refusing the media is a media error;
			// no answer at all is the BMC being unreachable.
			var he *rf.HTTPError
			if errors.As(err, &he) && he.Status != 401 && he.Status != 403 {
				return provisioner.Done, fmt.Errorf("%w: %v", provisioner.ErrMedia, err)
			}
			return provisioner.Done, translate(err)
		}
		if res, ok := d.started(op, "media", monitor); ok {
			return res, nil
		}
	}
	monitor, err := d.client.SetBoot(ctx, p, rf.Boot{BootSourceOverrideTarget: target, BootSourceOverrideEnabled: "Once", BootSourceOverrideMode: bootMode(uefi)})
	if err != nil {
		return provisioner.Done, translate(err)
	}
	if res, ok := d.started(op, "boot", monitor); ok {
		return res, nil
	}
	return d.restart(ctx, op, false)
}

// BootDisk ejects virtual media, boots from disk from now on, and powers
// the machine on (restarting it) or off.
func (d *Driver) BootDisk(ctx context.Context, uefi, powerOn bool) (provisioner.Result, error) {
	const op = "boot-disk"
	if res, finished, err := d.begin(ctx, op); err != nil || res.Dirty || finished {
		return res, err
	}
	p, err := d.system(ctx)
	if err != nil {
		return provisioner.Done, err
	}
	if d.addr.VirtualMedia {
		sys, _, err := d.client.System(ctx, p)
		if err != nil {
			return provisioner.Done, translate(err)
		}
		if cd, err := d.client.CDPath(ctx, sys); err == nil {
			monitor, err := d.client.EjectMedia(ctx, cd)
			if err != nil {
				return provisioner.Done, translate(err)
			}
			if res, ok := d.started(op, "eject", monitor); ok {
				return res, nil
			}
		}
	}
	monitor, err := d.client.SetBoot(ctx, p, rf.Boot{BootSourceOverrideTarget: "Hdd", BootSourceOverrideEnabled: "Continuous", BootSourceOverrideMode: bootMode(uefi)})
	if err != nil {
		return provisioner.Done, translate(err)
	}
	if res, ok := d.started(op, "boot", monitor); ok {
		return res, nil
	}
	if powerOn {
		return d.restart(ctx, op, false)
	}
	on, err := d.PowerState(ctx)
	if err != nil || !on {
		return provisioner.Done, err
	}
	return d.reset(ctx, op, p, rf.ResetForceOff)
}
