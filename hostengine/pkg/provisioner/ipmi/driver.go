// Package ipmi is the IPMI driver of the host engine: power and the boot
// device over IPMI v2.0 (lanplus) through github.com/bougou/go-ipmi. IPMI
// has no virtual media and no inventory: the deploy image boots over PXE,
// and inspection reports ErrNotSupported (use the hardwaredetails
// annotation or inspect.metal3.io: disabled). The UDP socket is opened
// through the hub's BMC egress policy: a refused address gets no datagram.
package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	ipmiclient "github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	ipmitypes "github.com/bougou/go-ipmi/pkg/types"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
)

// exchangeTimeout bounds one UDP request/response with the BMC.
const exchangeTimeout = time.Second

// commandTimeout bounds the one exchange of a command that changes the
// machine (chassis control, boot device): a BMC answers those when it has
// acted, which takes longer than a status read.
const commandTimeout = 5 * time.Second

// powerPollInterval is how soon PowerOn and PowerOff are called again
// while the machine has not reached the power state they asked for.
const powerPollInterval = time.Second

// Driver drives one machine over IPMI. It opens a session per call, as
// BMCs limit concurrent sessions.
type Driver struct {
	host    string
	port    int
	creds   provisioner.Credentials
	timeout time.Duration
	egress  egress.Policy

	mu    sync.Mutex
	suite ipmitypes.CipherSuiteID // the suite the BMC accepted; 0 until known
}

// cipherSuites are tried in order until the BMC accepts one: 17
// (HMAC-SHA256, AES-CBC-128) first, then the widely supported 3
// (HMAC-SHA1, AES-CBC-128). The one that works is remembered.
var cipherSuites = []ipmitypes.CipherSuiteID{ipmitypes.CipherSuiteID17, ipmitypes.CipherSuiteID3}

var _ provisioner.Provisioner = &Driver{}

// Options tune the driver.
type Options struct {
	// Timeout bounds each operation; 0 means 30 seconds.
	Timeout time.Duration
	// Egress is where the BMC's UDP socket may be opened.
	Egress egress.Policy
}

// New returns a driver for a parsed ipmi:// address.
func New(addr provisioner.Address, creds provisioner.Credentials, opts Options) (*Driver, error) {
	host, portStr, err := net.SplitHostPort(addr.Endpoint)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("invalid IPMI port %q", portStr)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	return &Driver{host: host, port: port, creds: creds, timeout: opts.Timeout, egress: opts.Egress}, nil
}

// dialer opens go-ipmi's UDP socket through the egress policy and keeps
// a refusal, whichever way the library reports the failed dial.
type dialer struct {
	d       *net.Dialer
	mu      sync.Mutex
	refused error
}

// Dial implements golang.org/x/net/proxy.Dialer, which go-ipmi dials
// through.
func (d *dialer) Dial(network, address string) (net.Conn, error) {
	conn, err := d.d.Dial(network, address)
	if errors.Is(err, egress.ErrRefused) {
		var re *egress.RefusedError
		d.mu.Lock()
		defer d.mu.Unlock()
		d.refused = err
		if errors.As(err, &re) {
			d.refused = re // without the dial's own wording around it
		}
	}
	return conn, err
}

func (d *dialer) refusal() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refused
}

// session opens a session, runs fn in it and closes it. Each session has
// its own UDP socket, so a late reply to an earlier session's request
// never reaches a later one; within a session go-ipmi takes as the answer
// only the reply that carries the request's sequence number and command.
func (d *Driver) session(ctx context.Context, fn func(*ipmiclient.Client) error) error {
	return d.open(ctx, false, fn)
}

// command is session for fn that changes the machine. Its requests are
// sent once, never again on a timeout: a BMC that acted late on the first
// copy would act again on the second (a second reset boots past the
// one-time boot device the first one used). A command that got no answer
// is an ErrUnreachable error; the operation is called again, and it reads
// the machine's state before it sends anything.
func (d *Driver) command(ctx context.Context, fn func(*ipmiclient.Client) error) error {
	return d.open(ctx, true, fn)
}

func (d *Driver) open(ctx context.Context, command bool, fn func(*ipmiclient.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	d.mu.Lock()
	suites := cipherSuites
	if d.suite != 0 {
		suites = []ipmitypes.CipherSuiteID{d.suite}
	}
	d.mu.Unlock()
	var lastErr error
	for _, suite := range suites {
		c, err := ipmiclient.NewClient(d.host, d.port, d.creds.Username, d.creds.Password)
		if err != nil {
			return err
		}
		dial := &dialer{d: d.egress.Dialer(exchangeTimeout)}
		// Exchanges are short: a BMC that ignores a suite it does not
		// support (ipmi_sim ignores 17) must not use up the whole budget.
		c = c.WithInterface(ipmiclient.InterfaceLanplus).WithTimeout(exchangeTimeout).WithRetry(2).WithCipherSuiteID(suite).WithUDPProxy(dial)
		if err := c.Connect(ctx); err != nil {
			if refused := dial.refusal(); refused != nil {
				return fmt.Errorf("connecting to %s: %w", net.JoinHostPort(d.host, strconv.Itoa(d.port)), refused)
			}
			// A suite the BMC does not offer can fail like bad
			// credentials; only the last suite's answer decides.
			lastErr = translate(err)
			continue
		}
		d.mu.Lock()
		d.suite = suite
		d.mu.Unlock()
		defer c.Close(ctx) //nolint:errcheck // closing the session is best effort
		if !command {
			return translate(fn(c))
		}
		c.WithRetry(0).WithTimeout(commandTimeout)
		err = fn(c)
		c.WithRetry(2).WithTimeout(exchangeTimeout) // closing the session is no command
		return translate(err)
	}
	return lastErr
}

// translate maps go-ipmi's errors to the provisioner's sentinels. No
// answer (a timeout, a refused port) is checked first: go-ipmi's messages
// for a session setup that timed out name the step ("Get Channel
// Authentication Capabilities", "rakp1"), which says nothing about the
// credentials. Only the BMC's answers refusing them (RAKP status codes, an
// authentication code that does not match the password) are ErrCredentials.
func translate(err error) error {
	if err == nil || errors.Is(err, provisioner.ErrAddressRefused) {
		return err
	}
	switch {
	case noAnswer(err):
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	case refusedCredentials(err):
		return fmt.Errorf("%w: %v", provisioner.ErrCredentials, err)
	}
	return err
}

// noAnswer tells whether err is the BMC not answering. go-ipmi keeps the
// chain of a command's errors, but joins those of a session setup into
// its message only, hence the wording checks.
func noAnswer(err error) bool {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &ne) && ne.Timeout()) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"i/o timeout", "timed out", "deadline exceeded", "no matching ipmi response", "no udp datagram matched", "connection refused"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// refusedCredentials tells whether err is the BMC refusing the user or the
// password.
func refusedCredentials(err error) bool {
	var se *ipmitypes.RmcpStatusError
	if errors.Is(err, ipmiclient.ErrRAKPAuthentication) || errors.As(err, &se) && refusingStatus(se.StatusCode()) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{strings.ToLower(ipmiclient.ErrRAKPAuthentication.Error()), "unauthorized name", "invalid role", "unauthorized role", "invalid integrity check value"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func refusingStatus(c ipmitypes.RmcpStatusCode) bool {
	switch c {
	case ipmitypes.RmcpStatusCodeUnauthorizedName, ipmitypes.RmcpStatusCodeInvalidRole,
		ipmitypes.RmcpStatusCodeUnauthorizedRoleOfPriLevel, ipmitypes.RmcpStatusCodeInvalidIntegrityCheckValue:
		return true
	}
	return false
}

// Register opens a session and reads the chassis status.
func (d *Driver) Register(ctx context.Context) error {
	_, err := d.PowerState(ctx)
	return err
}

// PowerState reads the chassis power state.
func (d *Driver) PowerState(ctx context.Context) (on bool, err error) {
	err = d.session(ctx, func(c *ipmiclient.Client) error {
		st, err := c.GetChassisStatus(ctx)
		if err != nil {
			return err
		}
		on = st.PowerIsOn
		return nil
	})
	return on, err
}

func (d *Driver) control(ctx context.Context, ctl chassis.ChassisControl) error {
	return d.command(ctx, func(c *ipmiclient.Client) error {
		_, err := c.ChassisControl(ctx, ctl)
		return err
	})
}

// done adapts a call that the BMC finishes when it answers (IPMI chassis
// control has no tasks) to a Result.
func done(err error) (provisioner.Result, error) { return provisioner.Done, err }

// setPower powers the machine on or off and reads the power state back: a
// BMC acknowledges a chassis control before the power changes, or without
// carrying it out. Until the machine is in the state asked for, the
// operation is in progress; calling it again reads the state first, and
// asks again only a machine still in the other state.
func (d *Driver) setPower(ctx context.Context, on bool) (provisioner.Result, error) {
	if current, err := d.PowerState(ctx); err != nil || current == on {
		return done(err)
	}
	ctl := chassis.ChassisControlPowerDown
	if on {
		ctl = chassis.ChassisControlPowerUp
	}
	if err := d.control(ctx, ctl); err != nil {
		return done(err)
	}
	current, err := d.PowerState(ctx)
	if err != nil || current == on {
		return done(err)
	}
	return provisioner.InProgress(powerPollInterval), nil
}

// PowerOn powers the machine on.
func (d *Driver) PowerOn(ctx context.Context) (provisioner.Result, error) {
	return d.setPower(ctx, true)
}

// PowerOff powers the machine off.
func (d *Driver) PowerOff(ctx context.Context) (provisioner.Result, error) {
	return d.setPower(ctx, false)
}

// Reboot power-cycles the machine, or powers it on when it is off.
func (d *Driver) Reboot(ctx context.Context, _ bool) (provisioner.Result, error) {
	on, err := d.PowerState(ctx)
	if err != nil {
		return done(err)
	}
	if !on {
		return done(d.control(ctx, chassis.ChassisControlPowerUp))
	}
	return done(d.control(ctx, chassis.ChassisControlHardReset))
}

// Inspect is not possible over IPMI.
func (d *Driver) Inspect(context.Context) (*metal3v1.HardwareDetails, error) {
	return nil, fmt.Errorf("%w: IPMI offers no hardware inventory", provisioner.ErrNotSupported)
}

func bootType(uefi bool) ipmitypes.BIOSBootType {
	if uefi {
		return ipmitypes.BIOSBootTypeEFI
	}
	return ipmitypes.BIOSBootTypeLegacy
}

// setBootDevice sets the boot device and reads it back: a BMC that
// acknowledged the change without making it (or a machine that refused
// it) would boot something else, and the deploy agent would never call.
// A persistent disk boot may read back as no override, the disk being the
// default.
func (d *Driver) setBootDevice(ctx context.Context, dev ipmitypes.BootDeviceSelector, uefi, persist bool) error {
	if err := d.command(ctx, func(c *ipmiclient.Client) error {
		return c.SetBootDevice(ctx, dev, bootType(uefi), persist)
	}); err != nil {
		return err
	}
	return d.session(ctx, func(c *ipmiclient.Client) error {
		flags := &ipmitypes.BootOptionParam_BootFlags{}
		if err := c.GetSystemBootOptionsParamFor(ctx, flags); err != nil {
			return err
		}
		got := flags.BootDeviceSelector
		if got == dev || (dev == ipmitypes.BootDeviceSelectorForceHardDrive && got == ipmitypes.BootDeviceSelectorNoOverride) {
			return nil
		}
		return fmt.Errorf("the BMC accepted boot device %q but reports %q", dev, got)
	})
}

// BootDeployImage sets PXE for the next boot and restarts the machine.
func (d *Driver) BootDeployImage(ctx context.Context, _ provisioner.DeployImage, uefi bool) (provisioner.Result, error) {
	if err := d.setBootDevice(ctx, ipmitypes.BootDeviceSelectorForcePXE, uefi, false); err != nil {
		return done(err)
	}
	return d.Reboot(ctx, false)
}

// BootDisk makes the disk the persistent boot device and sets the power.
func (d *Driver) BootDisk(ctx context.Context, uefi, powerOn bool) (provisioner.Result, error) {
	if err := d.setBootDevice(ctx, ipmitypes.BootDeviceSelectorForceHardDrive, uefi, true); err != nil {
		return done(err)
	}
	if powerOn {
		return d.Reboot(ctx, false)
	}
	return d.PowerOff(ctx)
}
