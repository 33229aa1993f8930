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

func (d *Driver) session(ctx context.Context, fn func(*ipmiclient.Client) error) error {
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
		return translate(fn(c))
	}
	return lastErr
}

func translate(err error) error {
	if err == nil || errors.Is(err, provisioner.ErrAddressRefused) {
		return err
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "password") || strings.Contains(msg, "unauthorized") || strings.Contains(msg, "authentication") || strings.Contains(msg, "rakp"):
		return fmt.Errorf("%w: %v", provisioner.ErrCredentials, err)
	case strings.Contains(msg, "timeout") || strings.Contains(msg, "refused") || strings.Contains(msg, "deadline"):
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	return err
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
	return d.session(ctx, func(c *ipmiclient.Client) error {
		_, err := c.ChassisControl(ctx, ctl)
		return err
	})
}

// done adapts a call that the BMC finishes when it answers (IPMI chassis
// control has no tasks) to a Result.
func done(err error) (provisioner.Result, error) { return provisioner.Done, err }

// PowerOn powers the machine on.
func (d *Driver) PowerOn(ctx context.Context) (provisioner.Result, error) {
	if on, err := d.PowerState(ctx); err != nil || on {
		return done(err)
	}
	return done(d.control(ctx, chassis.ChassisControlPowerUp))
}

// PowerOff powers the machine off.
func (d *Driver) PowerOff(ctx context.Context) (provisioner.Result, error) {
	if on, err := d.PowerState(ctx); err != nil || !on {
		return done(err)
	}
	return done(d.control(ctx, chassis.ChassisControlPowerDown))
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

// BootDeployImage sets PXE for the next boot and restarts the machine.
func (d *Driver) BootDeployImage(ctx context.Context, _ provisioner.DeployImage, uefi bool) (provisioner.Result, error) {
	if err := d.session(ctx, func(c *ipmiclient.Client) error {
		return c.SetBootDevice(ctx, ipmitypes.BootDeviceSelectorForcePXE, bootType(uefi), false)
	}); err != nil {
		return done(err)
	}
	return d.Reboot(ctx, false)
}

// BootDisk makes the disk the persistent boot device and sets the power.
func (d *Driver) BootDisk(ctx context.Context, uefi, powerOn bool) (provisioner.Result, error) {
	if err := d.session(ctx, func(c *ipmiclient.Client) error {
		return c.SetBootDevice(ctx, ipmitypes.BootDeviceSelectorForceHardDrive, bootType(uefi), true)
	}); err != nil {
		return done(err)
	}
	if powerOn {
		return d.Reboot(ctx, false)
	}
	return d.PowerOff(ctx)
}
