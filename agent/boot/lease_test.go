//go:build linux

package boot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeDHCP is a DHCP server as keepLease's client sees it: Renew answers
// from renews (then fails), Request gives a new lease; every call, apply
// and drop is recorded with the (fake) time since start.
type fakeDHCP struct {
	clk    *clocktesting.FakeClock
	start  time.Time
	length time.Duration

	mu     sync.Mutex
	renews []error
	events []string
}

func (f *fakeDHCP) lease(ip string) *nclient4.Lease {
	ack, _ := dhcpv4.New(dhcpv4.WithYourIP(net.ParseIP(ip)), dhcpv4.WithLeaseTime(uint32(f.length/time.Second)))
	return &nclient4.Lease{ACK: ack, Offer: ack}
}

func (f *fakeDHCP) record(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("%s %s", what, f.clk.Since(f.start)))
}

func (f *fakeDHCP) Renew(_ context.Context, l *nclient4.Lease, _ ...dhcpv4.Modifier) (*nclient4.Lease, error) {
	f.record("renew")
	f.mu.Lock()
	err := errors.New("no answer")
	if len(f.renews) > 0 {
		err, f.renews = f.renews[0], f.renews[1:]
	}
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.lease(l.ACK.YourIPAddr.String()), nil
}

func (f *fakeDHCP) Request(context.Context, ...dhcpv4.Modifier) (*nclient4.Lease, error) {
	f.record("request")
	return f.lease("192.0.2.20"), nil
}

func (f *fakeDHCP) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

// run runs keepLease with the first lease until the fake time reaches
// until, in steps of step (each taken once keepLease waits again).
func (f *fakeDHCP) run(t *testing.T, until, step time.Duration) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		keepLease(ctx, f, f.clk, f.lease("192.0.2.10"), func(l *nclient4.Lease) error { f.record("apply " + l.ACK.YourIPAddr.String()); return nil },
			func(l *nclient4.Lease) { f.record("drop " + l.ACK.YourIPAddr.String()) }, t.Logf)
	}()
	for f.clk.Since(f.start) < until {
		g.Eventually(f.clk.HasWaiters).Should(BeTrue(), "keepLease waits for its next step")
		f.clk.Step(step)
	}
	g.Eventually(f.clk.HasWaiters).Should(BeTrue())
	cancel()
	<-done
}

func newFakeDHCP(length time.Duration, renews ...error) *fakeDHCP {
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	return &fakeDHCP{clk: clocktesting.NewFakeClock(start), start: start, length: length, renews: renews}
}

// TestKeepLeaseRenews: a lease is renewed at T1 (half of it), and again
// at the renewed lease's T1.
func TestKeepLeaseRenews(t *testing.T) {
	f := newFakeDHCP(64*time.Minute, nil, nil)
	f.run(t, 70*time.Minute, 7500*time.Millisecond)
	NewWithT(t).Expect(f.log()).To(Equal([]string{"renew 32m0s", "apply 192.0.2.10 32m0s", "renew 1h4m0s", "apply 192.0.2.10 1h4m0s"}))
}

// TestKeepLeaseRetriesThenStartsOver: a renewal without answer is tried
// again after half the time left to T2 (then to the lease's end), a minute
// apart at least; a lease that ends without one is dropped and a new one
// asked for. A NAK ends the lease at once.
func TestKeepLeaseRetriesThenStartsOver(t *testing.T) {
	g := NewWithT(t)
	f := newFakeDHCP(64 * time.Minute)
	f.run(t, 65*time.Minute, 7500*time.Millisecond)
	g.Expect(f.log()).To(Equal([]string{
		"renew 32m0s", "renew 44m0s", "renew 50m0s", "renew 53m0s", "renew 54m30s", "renew 55m30s", // to T2 (56m)
		"renew 56m30s", "renew 1h0m15s", "renew 1h2m7.5s", "renew 1h3m7.5s", // to the end (64m)
		"drop 192.0.2.10 1h4m0s", "request 1h4m0s", "apply 192.0.2.20 1h4m0s",
	}))

	nak := &nclient4.ErrNak{Nak: &dhcpv4.DHCPv4{}}
	f = newFakeDHCP(64*time.Minute, nak)
	f.run(t, 33*time.Minute, 7500*time.Millisecond)
	g.Expect(f.log()).To(Equal([]string{"renew 32m0s", "drop 192.0.2.10 32m0s", "request 32m0s", "apply 192.0.2.20 32m0s"}))
}

// TestLeaseTimes: T1 and T2 from the ACK, else RFC 2131's defaults; an
// infinite lease is never renewed.
func TestLeaseTimes(t *testing.T) {
	g := NewWithT(t)
	ack, _ := dhcpv4.New(dhcpv4.WithLeaseTime(3600))
	l, t1, t2 := leaseTimes(ack)
	g.Expect([]time.Duration{l, t1, t2}).To(Equal([]time.Duration{time.Hour, 30 * time.Minute, 52*time.Minute + 30*time.Second}))
	ack.UpdateOption(dhcpv4.OptRenewTimeValue(10 * time.Minute))
	ack.UpdateOption(dhcpv4.OptRebindingTimeValue(20 * time.Minute))
	l, t1, t2 = leaseTimes(ack)
	g.Expect([]time.Duration{l, t1, t2}).To(Equal([]time.Duration{time.Hour, 10 * time.Minute, 20 * time.Minute}))
	ack, _ = dhcpv4.New(dhcpv4.WithLeaseTime(0xffffffff))
	l, _, _ = leaseTimes(ack)
	g.Expect(l).To(Equal(infiniteLease))
}
