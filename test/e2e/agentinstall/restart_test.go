package agentinstall

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestHubRestart: the hub (agent service and controllers) stops while a
// single node installs and a new one starts in its place; knowing only
// what the API holds, it sees the install through.
func TestHubRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(100 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	const ns = "restart"
	lab, ie := start(t, g, ns, 1, 0, "127.77.6")
	bootAll(g, lab, ie)
	g.Eventually(aciState(ns)).Should(Equal("installing"))

	g.Expect(stopHub()).To(Succeed())
	t.Log("The hub stopped; the agent carries on without it")
	time.Sleep(3 * time.Second)
	var err error
	stopHub, err = startHub()
	g.Expect(err).NotTo(HaveOccurred())
	t.Log("A new hub started")

	aci := waitCompleted(g, ns, ns)
	g.Expect(condMessage(aci, "Completed")).To(Equal("The installation has completed: Cluster is installed"))
	g.Expect(spokeNodes(g, ns, ns).Items).To(HaveLen(1))
}
