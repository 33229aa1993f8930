//go:build linux

package boot

import (
	"context"
	"errors"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"k8s.io/utils/clock"
)

// The live image keeps the DHCP leases of its NICs for as long as it runs,
// as RFC 2131 (4.4.5) asks of a client: an agent writing a large image, or
// a discovery agent waiting for its cluster, may run for longer than a
// short lease, and a server that never heard of a renewal gives the address
// to another machine once the lease ends.

// leaseClient is what keepLease needs of a DHCP client (nclient4.Client).
type leaseClient interface {
	Request(ctx context.Context, modifiers ...dhcpv4.Modifier) (*nclient4.Lease, error)
	Renew(ctx context.Context, lease *nclient4.Lease, modifiers ...dhcpv4.Modifier) (*nclient4.Lease, error)
}

// infiniteLease is the lease time that never ends (0xffffffff seconds).
const infiniteLease = time.Duration(0xffffffff) * time.Second

// minLeaseRetry is the shortest pause between two attempts to renew a
// lease, as RFC 2131 4.4.5 suggests (60 seconds), unless the lease ends
// sooner.
const minLeaseRetry = 60 * time.Second

// leaseTimes are a lease's length, renewal time (T1) and rebinding time
// (T2), from the ACK's options or, without them, RFC 2131's defaults (T1
// half the lease, T2 seven eighths).
func leaseTimes(ack *dhcpv4.DHCPv4) (length, t1, t2 time.Duration) {
	length = ack.IPAddressLeaseTime(infiniteLease)
	if length >= infiniteLease || length <= 0 {
		return infiniteLease, infiniteLease, infiniteLease
	}
	t1 = ack.IPAddressRenewalTime(length / 2)
	t2 = ack.IPAddressRebindingTime(length * 7 / 8)
	if t2 <= 0 || t2 > length {
		t2 = length * 7 / 8
	}
	if t1 <= 0 || t1 > t2 {
		t1 = min(length/2, t2)
	}
	return length, t1, t2
}

// keepLease renews lease, which the NIC got at clk.Now(), until ctx ends:
// from T1 it asks the server that gave it (nclient4 broadcasts, so this is
// renewing and rebinding at once), again after half the time left to T2,
// then to the lease's end, but no sooner than a minute; apply configures
// each renewed lease. A lease that ended (or that the server refused with
// a NAK) is dropped (drop removes its address) and a new one asked for,
// every minute until one comes.
func keepLease(ctx context.Context, c leaseClient, clk clock.Clock, lease *nclient4.Lease, apply func(*nclient4.Lease) error, drop func(*nclient4.Lease), logf Logf) {
	got := clk.Now()
	for {
		length, t1, t2 := leaseTimes(lease.ACK)
		if length == infiniteLease {
			return
		}
		next := got.Add(t1)
		for renewed := false; !renewed; {
			if !sleepUntil(ctx, clk, next) {
				return
			}
			now := clk.Now()
			end := got.Add(length)
			why := "ended without a renewal"
			if now.Before(end) {
				nl, err := c.Renew(ctx, lease)
				if err == nil {
					lease, got, renewed = nl, clk.Now(), true
					if err := apply(lease); err != nil {
						logf("Configuring the renewed DHCP lease of %s: %v", lease.ACK.YourIPAddr, err)
					}
					l, _, _ := leaseTimes(lease.ACK)
					logf("Renewed the DHCP lease of %s for %s", lease.ACK.YourIPAddr, l)
					continue
				}
				if ctx.Err() != nil {
					return
				}
				var nak *nclient4.ErrNak
				if !errors.As(err, &nak) {
					logf("Renewing the DHCP lease of %s: %v; trying again", lease.ACK.YourIPAddr, err)
					deadline := got.Add(t2)
					if !now.Before(deadline) {
						deadline = end
					}
					next = now.Add(max(deadline.Sub(now)/2, minLeaseRetry))
					if next.After(end) {
						next = end
					}
					continue
				}
				why = "was refused a renewal (" + err.Error() + ")"
			}
			// The address is not ours any more.
			logf("The DHCP lease of %s %s: asking for a new one", lease.ACK.YourIPAddr, why)
			drop(lease)
			if lease = requestLease(ctx, c, clk, logf); lease == nil {
				return
			}
			got, renewed = clk.Now(), true
			if err := apply(lease); err != nil {
				logf("Configuring the new DHCP lease of %s: %v", lease.ACK.YourIPAddr, err)
			}
		}
	}
}

// requestLease asks for a new lease every minute until one comes; nil when
// ctx ended.
func requestLease(ctx context.Context, c leaseClient, clk clock.Clock, logf Logf) *nclient4.Lease {
	for {
		lease, err := c.Request(ctx)
		if err == nil {
			logf("Got the DHCP lease of %s", lease.ACK.YourIPAddr)
			return lease
		}
		if ctx.Err() != nil {
			return nil
		}
		logf("Asking for a DHCP lease: %v; trying again in %s", err, minLeaseRetry)
		if !sleepUntil(ctx, clk, clk.Now().Add(minLeaseRetry)) {
			return nil
		}
	}
}

// sleepUntil waits until t on clk; false when ctx ended first.
func sleepUntil(ctx context.Context, clk clock.Clock, t time.Time) bool {
	d := t.Sub(clk.Now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := clk.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}
