package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

// The machines' faults of the fault plan (Firmware.Faults).

// machineNet is a machine's network under fault.MachineNetDrop.
type machineNet struct {
	mu        sync.Mutex
	downUntil time.Time
}

// errNetDown is what a machine's HTTP calls fail with while its network is down.
var errNetDown = fmt.Errorf("the machine's network is down (injected fault): %w", syscall.ENETUNREACH)

// machineHTTP is c as m's own calls use it: failing while the fault plan
// has m's network down.
func (f *Firmware) machineHTTP(m *machine.Machine, c *http.Client) *http.Client {
	c = f.fromMachine(m, c)
	if !f.Faults.Has(fault.MachineNetDrop) && !f.Faults.Has(fault.MachineDownloadDrop) {
		return c
	}
	f.mu.Lock()
	if f.nets == nil {
		f.nets = map[string]*machineNet{}
	}
	n := f.nets[m.ID]
	if n == nil {
		n = &machineNet{}
		f.nets[m.ID] = n
	}
	f.mu.Unlock()
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	wrapped := *c
	wrapped.Transport = &faultyNet{base: base, net: n, d: f.Faults.For(m.ID), logf: func(format string, args ...any) { f.logf(m, format, args...) }}
	return &wrapped
}

// faultyNet is a machine's transport under fault.MachineNetDrop: a call
// made while the network is up decides whether it drops (for the fault's
// duration, from this call); calls while it is down fail at once.
type faultyNet struct {
	base http.RoundTripper
	net  *machineNet
	d    *fault.Decider
	logf func(format string, args ...any)
}

func (t *faultyNet) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	t.net.mu.Lock()
	if now.Before(t.net.downUntil) {
		t.net.mu.Unlock()
		closeBody(req)
		return nil, errNetDown
	}
	if f := t.d.Decide(fault.MachineNetDrop); f.Fired() {
		t.net.downUntil = now.Add(f.Duration)
		t.net.mu.Unlock()
		t.logf("Network down for %s (injected fault)", f.Duration)
		closeBody(req)
		return nil, errNetDown
	}
	t.net.mu.Unlock()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body := &faultyBody{ReadCloser: resp.Body, net: t.net, dropAt: -1, logf: t.logf}
	if resp.ContentLength >= downloadDropMin {
		if f := t.d.Decide(fault.MachineDownloadDrop); f.Fired() {
			body.dropAt, body.dropFor = downloadDropAt, f.Duration
		}
	}
	resp.Body = body
	return resp, nil
}

// fault.MachineDownloadDrop is decided on answers of downloadDropMin
// bytes or more, and drops the network after downloadDropAt of them.
const (
	downloadDropMin = 2 << 20
	downloadDropAt  = 1 << 20
)

// faultyBody is a response body on a machine's network under
// fault.MachineNetDrop: a transfer in flight when the network goes down
// breaks (the connection is gone, as its peer or a switch in between
// resets it). Under fault.MachineDownloadDrop it takes the network down
// itself after dropAt bytes (-1: never).
type faultyBody struct {
	io.ReadCloser
	net     *machineNet
	logf    func(format string, args ...any)
	read    int64
	dropAt  int64
	dropFor time.Duration
}

func (b *faultyBody) Read(p []byte) (int, error) {
	now := time.Now()
	b.net.mu.Lock()
	if b.dropAt >= 0 && b.read >= b.dropAt {
		b.net.downUntil = now.Add(b.dropFor)
		b.dropAt = -1
		b.logf("Network down for %s, %d bytes into a download (injected fault)", b.dropFor, b.read)
	}
	down := now.Before(b.net.downUntil)
	b.net.mu.Unlock()
	if down {
		_ = b.Close()
		return 0, errNetDown
	}
	if b.dropAt >= 0 && int64(len(p)) > b.dropAt-b.read {
		p = p[:max(b.dropAt-b.read, 1)]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	return n, err
}

// closeBody closes a request's body, as a RoundTripper must, also on errors.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// powerCut cuts a machine's power during an image write, as the fault
// plan's fault.MachinePowerLoss decides: each write at the start of a
// disk (where the deploy agent starts writing an image) is a decision;
// when it fires, the power goes when the write reaches the fault's bytes.
type powerCut struct {
	ctx  context.Context // the boot's
	m    *machine.Machine
	d    *fault.Decider
	logf func(format string, args ...any)

	mu   sync.Mutex
	at   int64 // the offset the power goes at; -1 when no cut is due
	lost bool
}

// errPowerLost is what writes fail with once the power is gone.
var errPowerLost = errors.New("the machine lost power (injected fault)")

// powerCut is the power cut of the boot with ctx of m, nil when the plan
// cuts none.
func (f *Firmware) powerCut(ctx context.Context, m *machine.Machine) *powerCut {
	if !f.Faults.Has(fault.MachinePowerLoss) {
		return nil
	}
	return &powerCut{ctx: ctx, m: m, d: f.Faults.For(m.ID), at: -1, logf: func(format string, args ...any) { f.logf(m, format, args...) }}
}

func (c *powerCut) writeAt(d *machine.Disk, p []byte, off int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost {
		return 0, errPowerLost
	}
	if off == 0 {
		c.at = -1
		if f := c.d.Decide(fault.MachinePowerLoss); f.Fired() {
			c.at = f.Bytes
		}
	}
	if c.at < 0 || off+int64(len(p)) <= c.at {
		return d.WriteAt(p, off)
	}
	n := 0
	if keep := c.at - off; keep > 0 {
		n, _ = d.WriteAt(p[:keep], off)
	}
	c.lost = true
	c.logf("Power lost while writing %s, %d bytes in (injected fault)", d.Name, off+int64(n))
	c.m.GuestPowerOff(c.ctx)
	return n, errPowerLost
}
