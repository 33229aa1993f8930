package fault

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		plan string
		want string // String() of the parsed plan
	}{
		{"", ""},
		{"seed=1234", "seed=1234"},
		{"redfish.5xx=10%", "redfish.5xx=10%"},
		{"seed=7, redfish.5xx=12.5%:503;redfish.hang=@3", "seed=7,redfish.5xx=12.5%:503,redfish.hang=@3"},
		{"machine.netdrop=4-:30s redfish.reset=2-5", "machine.netdrop=4-:30s,redfish.reset=2-5"},
		{"machine.powerloss=@1:1MiB,ipmi.fail=100%,ipmi.drop=@2", "ipmi.drop=@2,ipmi.fail=100%,machine.powerloss=@1:1MiB"},
		{"redfish.slowpower=50%:2s,redfish.media=@1,redfish.task=1-", "redfish.media=@1,redfish.slowpower=50%:2s,redfish.task=1-"},
		{"seed=18446744073709551615", "seed=18446744073709551615"},
		{"redfish.hang[host-1]=@3,redfish.hang=10%,redfish.5xx[host-0]=1-", "redfish.5xx[host-0]=1-,redfish.hang=10%,redfish.hang[host-1]=@3"},
		{"equinix.5xx=10%:503,equinix.slowprovision=@1:2m,equinix.nohardware[worker-0]=@1,equinix.failed=2-3", "equinix.5xx=10%:503,equinix.failed=2-3,equinix.nohardware[worker-0]=@1,equinix.slowprovision=@1:2m"},
	} {
		p, err := Parse(tc.plan)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.plan, err)
			continue
		}
		if got := p.String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.plan, got, tc.want)
		}
		again, err := Parse(p.String())
		if err != nil || again.String() != p.String() || again.Seed != p.Seed || len(again.rules) != len(p.rules) {
			t.Errorf("%q does not round-trip: %v, %q", tc.plan, err, again)
		}
		for k, r := range p.rules {
			if again.rules[k] != r {
				t.Errorf("%q: rule %s is %+v after a round trip, was %+v", tc.plan, k, again.rules[k], r)
			}
		}
	}
}

func TestParseErrorsNameTheItem(t *testing.T) {
	for _, tc := range []struct{ plan, item, why string }{
		{"redfish.5xx=10%,redfish.6xx=1%", "redfish.6xx=1%", "unknown kind"},
		{"redfish.5xx", "redfish.5xx", "want seed="},
		{"redfish.5xx=", "redfish.5xx=", "want seed="},
		{"redfish.5xx=0%", "redfish.5xx=0%", "above 0"},
		{"redfish.5xx=101%", "redfish.5xx=101%", "at most 100"},
		{"redfish.5xx=ten%", "redfish.5xx=ten%", "percentage"},
		{"redfish.5xx=10%:404", "redfish.5xx=10%:404", "500 to 599"},
		{"redfish.hang=@0", "redfish.hang=@0", "n from 1"},
		{"redfish.hang=5-3", "redfish.hang=5-3", "m at least n"},
		{"redfish.hang=x-", "redfish.hang=x-", "n from 1"},
		{"redfish.hang=soon", "redfish.hang=soon", "neither a rate"},
		{"redfish.hang=@1:forever", "redfish.hang=@1:forever", "positive duration"},
		{"redfish.reset=@1:5s", "redfish.reset=@1:5s", "takes no parameter"},
		{"machine.netdrop=@1:", "machine.netdrop=@1:", "empty parameter"},
		{"machine.powerloss=@1:1MB", "machine.powerloss=@1:1MB", "KiB, MiB or GiB"},
		{"seed=-1", "seed=-1", "not a number"},
		{"seed=1,seed=2", "seed=2", "twice"},
		{"ipmi.fail=@1 ipmi.fail=@2", "ipmi.fail=@2", "planned twice"},
		{"ipmi.fail[h-1]=@1 ipmi.fail[h-1]=@2", "ipmi.fail[h-1]=@2", "planned twice"},
		{"ipmi.fail[h-1=@1", "ipmi.fail[h-1=@1", "to name one emulator"},
		{"ipmi.fail[]=@1", "ipmi.fail[]=@1", "to name one emulator"},
		{"ipmi.fial[h-1]=@1", "ipmi.fial[h-1]=@1", "unknown kind"},
		{"equinix.5xx=10%:429", "equinix.5xx=10%:429", "500 to 599"},
		{"equinix.failed=@1:5s", "equinix.failed=@1:5s", "takes no parameter"},
		{"equinix.slowprovision=@1:later", "equinix.slowprovision=@1:later", "positive duration"},
	} {
		_, err := Parse(tc.plan)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", tc.plan)
			continue
		}
		g := NewWithT(t)
		g.Expect(err.Error()).To(ContainSubstring("%q", tc.item), tc.plan)
		g.Expect(err.Error()).To(ContainSubstring(tc.why), tc.plan)
	}
}

func TestDefaultsAndParams(t *testing.T) {
	g := NewWithT(t)
	p := MustParse("redfish.5xx=100%,redfish.hang=100%,machine.netdrop=100%:1m30s,machine.powerloss=100%:64KiB,redfish.slowpower=100%")
	d := p.For("host-0")
	g.Expect(d.Decide(Redfish5xx)).To(Equal(Fault{Kind: Redfish5xx, N: 1, Status: 500}))
	g.Expect(d.Decide(RedfishHang).Duration).To(Equal(10 * time.Minute))
	g.Expect(d.Decide(MachineNetDrop).Duration).To(Equal(90 * time.Second))
	g.Expect(d.Decide(MachinePowerLoss).Bytes).To(Equal(int64(64 << 10)))
	g.Expect(d.Decide(RedfishSlowPower).Duration).To(Equal(10 * time.Second))
	g.Expect(d.Decide(RedfishReset).Fired()).To(BeFalse(), "not in the plan")
	g.Expect(p.Fired(Redfish5xx)).To(Equal(1))
	e := MustParse("equinix.5xx=100%,equinix.slowprovision=100%,equinix.nohardware=@1,equinix.failed=@1").For("master-0")
	g.Expect(e.Decide(Equinix5xx)).To(Equal(Fault{Kind: Equinix5xx, N: 1, Status: 500}))
	g.Expect(e.Decide(EquinixSlowProvision).Duration).To(Equal(5 * time.Minute))
	g.Expect(e.Decide(EquinixNoHardware)).To(Equal(Fault{Kind: EquinixNoHardware, N: 1}))
	g.Expect(e.Decide(EquinixFailed).Fired()).To(BeTrue())
	var nilPlan *Plan
	g.Expect(nilPlan.For("x").Decide(Redfish5xx).Fired()).To(BeFalse())
	g.Expect(nilPlan.String()).To(BeEmpty())
}

func TestSchedules(t *testing.T) {
	g := NewWithT(t)
	p := MustParse("redfish.hang=@3,redfish.reset=2-4,redfish.5xx=5-")
	d := p.For("bmc")
	var hang, reset, fivexx []int
	for n := 1; n <= 7; n++ {
		if d.Decide(RedfishHang).Fired() {
			hang = append(hang, n)
		}
		if d.Decide(RedfishReset).Fired() {
			reset = append(reset, n)
		}
		if d.Decide(Redfish5xx).Fired() {
			fivexx = append(fivexx, n)
		}
	}
	g.Expect(hang).To(Equal([]int{3}))
	g.Expect(reset).To(Equal([]int{2, 3, 4}))
	g.Expect(fivexx).To(Equal([]int{5, 6, 7}))
	g.Expect(p.For("other").Decide(RedfishHang).Fired()).To(BeFalse(), "each emulator counts its own decisions")
}

func TestRulesForOneEmulator(t *testing.T) {
	g := NewWithT(t)
	p := MustParse("redfish.hang[host-1]=@1,redfish.5xx=@1,redfish.5xx[host-2]=@2")
	g.Expect(p.Has(RedfishHang)).To(BeTrue())
	g.Expect(sequence(p, "host-0", RedfishHang, 2)).To(Equal([]bool{false, false}), "host-1's rule only")
	g.Expect(sequence(p, "host-1", RedfishHang, 2)).To(Equal([]bool{true, false}))
	g.Expect(sequence(p, "host-0", Redfish5xx, 2)).To(Equal([]bool{true, false}), "the rule for every emulator")
	g.Expect(sequence(p, "host-2", Redfish5xx, 2)).To(Equal([]bool{false, true}), "host-2's rule wins")
}

// sequence is which of n decisions of k fire on emulator id.
func sequence(p *Plan, id string, k Kind, n int) []bool {
	d := p.For(id)
	seq := make([]bool, n)
	for i := range seq {
		seq[i] = d.Decide(k).Fired()
	}
	return seq
}

func TestSameSeedSameSequence(t *testing.T) {
	g := NewWithT(t)
	const plan = "seed=1234,redfish.5xx=20%,redfish.reset=5%"
	a := sequence(MustParse(plan), "host-0", Redfish5xx, 500)
	g.Expect(sequence(MustParse(plan), "host-0", Redfish5xx, 500)).To(Equal(a))

	fired := 0
	for _, f := range a {
		if f {
			fired++
		}
	}
	g.Expect(fired).To(BeNumerically("~", 100, 30), "about 20% of 500")
	g.Expect(sequence(MustParse("seed=1235,redfish.5xx=20%"), "host-0", Redfish5xx, 500)).NotTo(Equal(a), "another seed")
	g.Expect(sequence(MustParse(plan), "host-1", Redfish5xx, 500)).NotTo(Equal(a), "another emulator")
	g.Expect(sequence(MustParse("seed=1234,redfish.5xx=20%"), "host-0", Redfish5xx, 500)).To(Equal(a),
		"the other kinds of the plan do not change a kind's sequence")

	// Concurrency between emulators does not change one's sequence.
	p := MustParse(plan)
	var wg sync.WaitGroup
	seqs := make([][]bool, 8)
	for i := range seqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "host-0"
			if i > 0 {
				id = "host-" + string(rune('a'+i))
			}
			seqs[i] = sequence(p, id, Redfish5xx, 500)
		}()
	}
	wg.Wait()
	g.Expect(seqs[0]).To(Equal(a))
}

func TestEnsureSeed(t *testing.T) {
	g := NewWithT(t)
	p := MustParse("redfish.5xx=10%")
	g.Expect(p.EnsureSeed()).To(BeTrue())
	g.Expect(p.String()).To(MatchRegexp(`^seed=\d+,redfish.5xx=10%$`))
	g.Expect(p.EnsureSeed()).To(BeFalse(), "kept")
	given := MustParse("seed=9,redfish.5xx=10%")
	g.Expect(given.EnsureSeed()).To(BeFalse())
	g.Expect(given.Seed).To(Equal(uint64(9)))
}
