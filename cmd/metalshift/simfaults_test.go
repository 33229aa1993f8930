package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
)

// TestParseFaults: --faults names the item at fault, prints the plan, and
// a seed it chose, so that the run can be replayed.
func TestParseFaults(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	plan, err := parseFaults("", &out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan).To(BeNil())
	g.Expect(out.String()).To(BeEmpty())

	_, err = parseFaults("redfish.5xx=10%,redfish.hang=sometimes", &out)
	g.Expect(err).To(MatchError(ContainSubstring(`--faults: fault plan item "redfish.hang=sometimes"`)))

	plan, err = parseFaults("seed=42,redfish.5xx=10%", &out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Seed).To(Equal(uint64(42)))
	g.Expect(out.String()).To(Equal("Fault plan: seed=42,redfish.5xx=10%\n"))

	out.Reset()
	plan, err = parseFaults("redfish.5xx=10%", &out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.SeedSet).To(BeTrue())
	g.Expect(out.String()).To(ContainSubstring("replay these faults with --faults '" + plan.String() + "'"))
}
