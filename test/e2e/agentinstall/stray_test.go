package agentinstall

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// TestStrayBoot: while a single-node cluster installs, a second machine
// boots the same InfraEnv's discovery image (a stray boot). The service
// refuses its registration with 409 and upstream's message, which its
// agent logs; no Agent is made for it, and the install completes.
func TestStrayBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(100 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns = "stray"
	lab, ie := startSpare(t, g, ns, 1, 0, 1, "127.77.12")
	node, stray := lab.Machines[0], lab.Machines[1]
	bootISO(g, node, ie.Status.ISODownloadURL)
	approve(g, ns, node.UUID)
	g.Eventually(aciState(ns)).Should(BeElementOf("preparing-for-installation", "installing"))

	bootISO(g, stray, ie.Status.ISODownloadURL)
	const refused = "Host can register only in one of the following states: [insufficient ready pending-for-input adding-hosts]"
	g.Eventually(func() string {
		for _, l := range lab.Firmware.Log(stray.ID) {
			if strings.Contains(l, "409") {
				return l
			}
		}
		return ""
	}).Should(ContainSubstring(refused))
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: stray.UUID}, &agentinstallv1.Agent{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Agent for the stray machine: %v", err)

	waitCompleted(g, ns, ns)
}
