package equinixapi

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
)

// TestFacilityStringOrList: a device's facility is read as one code or an
// ordered list, and one code is written back as a string.
func TestFacilityStringOrList(t *testing.T) {
	g := NewWithT(t)
	var in DeviceCreateInput
	g.Expect(json.Unmarshal([]byte(`{"facility":"da11","plan":"p"}`), &in)).To(Succeed())
	g.Expect(in.Facility).To(Equal(StringOrList{"da11"}))
	g.Expect(json.Unmarshal([]byte(`{"facility":["sv15","any"]}`), &in)).To(Succeed())
	g.Expect(in.Facility).To(Equal(StringOrList{"sv15", "any"}))
	g.Expect(json.Unmarshal([]byte(`{"facility":3}`), &in)).NotTo(Succeed())

	out, err := json.Marshal(DeviceCreateInput{Facility: StringOrList{"da11"}, Plan: "p", OperatingSystem: "o"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring(`"facility":"da11"`))
	out, err = json.Marshal(DeviceCreateInput{Metro: "da", Plan: "p", OperatingSystem: "o"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).NotTo(ContainSubstring("facility"), "no facility when a metro is given")
}
