package machine

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// recorder is firmware that keeps each boot's context and watches media.
type recorder struct {
	mu    sync.Mutex
	boots []context.Context
	from  []BootTarget
	media []string
}

func (r *recorder) Boot(ctx context.Context, _ *Machine, from BootTarget) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.boots = append(r.boots, ctx)
	r.from = append(r.from, from)
}

func (r *recorder) MediaChanged(m *Machine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.media = append(r.media, m.Media())
}

func (r *recorder) boot(i int) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.boots) {
		return nil
	}
	return r.boots[i]
}

func TestGuestPowerOffAndReset(t *testing.T) {
	g := NewWithT(t)
	m := New("m-0", "uuid", Hardware{})
	r := &recorder{}
	m.SetFirmware(r)
	m.SetOverride(BootOverride{Target: BootPxe, UEFI: true})
	m.PowerOn()
	g.Eventually(func() context.Context { return r.boot(0) }).ShouldNot(BeNil())
	first := r.boot(0)

	m.GuestReset(first)
	g.Eventually(func() context.Context { return r.boot(1) }).ShouldNot(BeNil())
	g.Expect(first.Err()).To(HaveOccurred(), "the first boot is over")
	g.Expect(m.PoweredOn()).To(BeTrue())
	g.Expect(m.Boots()).To(Equal(2))
	r.mu.Lock()
	g.Expect(r.from).To(Equal([]BootTarget{BootPxe, BootHdd}), "the one-time override was used by the first boot")
	r.mu.Unlock()

	m.GuestPowerOff(first)
	g.Expect(m.PoweredOn()).To(BeTrue(), "a boot that is over cannot power the machine off")
	m.GuestReset(first)
	g.Expect(m.Boots()).To(Equal(2), "nor reset it")

	second := r.boot(1)
	m.GuestPowerOff(second)
	g.Expect(m.PoweredOn()).To(BeFalse())
	g.Expect(second.Err()).To(HaveOccurred())
}

func TestMediaWatcher(t *testing.T) {
	g := NewWithT(t)
	m := New("m-0", "uuid", Hardware{})
	r := &recorder{}
	m.SetFirmware(r)
	g.Expect(m.InsertMedia("http://10.0.2.2/a.iso")).To(Succeed())
	m.EjectMedia()
	m.SetMediaFault(true)
	g.Expect(m.InsertMedia("http://10.0.2.2/b.iso")).To(MatchError(ErrMediaFault))
	g.Expect(r.media).To(Equal([]string{"http://10.0.2.2/a.iso", ""}), "a refused insert changes nothing")
}
