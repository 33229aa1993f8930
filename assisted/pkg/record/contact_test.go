package record

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// TestLastContact: an agent's last contact is the later of its recorded
// contact and its last progress report, so that a host reporting its
// install's stages is heard from without a contact recorded as well.
func TestLastContact(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	a := &agentinstallv1.Agent{}
	g.Expect(LastContact(a).IsZero()).To(BeTrue(), "never heard from")

	SetLastContact(a, t0)
	g.Expect(LastContact(a)).To(BeTemporally("==", t0))

	SetStage(a, "Installing", "", nil, 10, metav1.NewTime(t0.Add(time.Minute)))
	g.Expect(LastContact(a)).To(BeTemporally("==", t0.Add(time.Minute)), "a progress report after the recorded contact")

	SetLastContact(a, t0.Add(2*time.Minute))
	g.Expect(LastContact(a)).To(BeTemporally("==", t0.Add(2*time.Minute)), "a contact after the progress report")

	a.Annotations[LastContactAnnotation] = "garbled"
	g.Expect(LastContact(a)).To(BeTemporally("==", t0.Add(time.Minute)), "an unreadable contact counts as none")
}
