package webhooks_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metalshift/metalshift/infrastructure/equinix/webhooks"
)

const (
	resA = "6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	resB = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4e"
)

// TestValidateHardwareReservationID: the three forms the provider honours
// are accepted, anything else is refused with a reason.
func TestValidateHardwareReservationID(t *testing.T) {
	path := field.NewPath("spec", "hardwareReservationID")
	for _, ok := range []string{"", "next-available", resA, resA + "," + resB, resA + " , " + resB, "6F1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"} {
		t.Run("ok "+ok, func(t *testing.T) {
			NewWithT(t).Expect(webhooks.ValidateHardwareReservationID(ok, path)).To(BeEmpty())
		})
	}
	for value, want := range map[string]string{
		"any":                    `"any" is not a hardware reservation ID`,
		resA + ",next-available": "next-available stands alone",
		resA + ",":               "has an empty entry",
		"," + resA:               "has an empty entry",
		resA + "," + resA:        "names reservation " + resA + " twice",
		resA + ",6F1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D": "twice",
		"{" + resA + "}":   "is not a hardware reservation ID",
		"urn:uuid:" + resA: "is not a hardware reservation ID",
	} {
		t.Run("refused "+value, func(t *testing.T) {
			g := NewWithT(t)
			errs := webhooks.ValidateHardwareReservationID(value, path)
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Field).To(Equal("spec.hardwareReservationID"))
			g.Expect(errs[0].Error()).To(ContainSubstring(want))
		})
	}
}
