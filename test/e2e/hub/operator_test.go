package hub

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/gomega"
)

// checkBaremetalOperator checks the bare-metal operator in an installed
// cluster (admin is its kubeconfig) as a user sees it: it runs there (the
// simulator's kubelet runs the manager image's containers for real), its
// baremetal ClusterOperator is its own report, its webhook refuses an
// invalid Provisioning naming the field, a valid one deploys metal3, and on
// a platform it does not support it reports Disabled.
func checkBaremetalOperator(g Gomega, admin string) {
	co := func(jsonpath string) func() string {
		return func() string {
			out, _ := kubectl(admin, "get", "clusteroperator", "baremetal", "-o", "jsonpath="+jsonpath)
			return out
		}
	}
	cond := func(t string) string {
		return `{.status.conditions[?(@.type=="` + t + `")].status} {.status.conditions[?(@.type=="` + t + `")].reason}`
	}
	g.Eventually(co(cond("Available")), time.Minute, time.Second).Should(Equal("True WaitingForProvisioningCR"))
	out, err := kubectl(admin, "-n", "openshift-machine-api", "get", "pods", "-l", "k8s-app=cluster-baremetal-operator",
		"-o", "jsonpath={.items[*].status.phase} {.items[*].status.containerStatuses[*].ready}")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(Equal("Running true"))

	dir, err := os.MkdirTemp("", "provisioning-")
	g.Expect(err).NotTo(HaveOccurred())
	defer os.RemoveAll(dir)
	apply := func(spec string) (string, error) {
		f := filepath.Join(dir, "provisioning.yaml")
		g.Expect(os.WriteFile(f, []byte("apiVersion: metal3.io/v1alpha1\nkind: Provisioning\nmetadata:\n  name: provisioning-configuration\nspec:\n"+spec), 0o600)).To(Succeed())
		return kubectl(admin, "apply", "-f", f)
	}
	// The webhook's failure policy is Ignore (upstream's): it must answer
	// for this to be refused.
	out, err = apply("  provisioningNetwork: Managed\n  provisioningIP: not-an-ip\n  provisioningNetworkCIDR: 172.22.0.0/24\n  provisioningDHCPRange: 172.22.0.10,172.22.0.100\n")
	g.Expect(err).To(HaveOccurred(), "an invalid Provisioning is refused: %s", out)
	g.Expect(out).To(ContainSubstring(`admission webhook "vprovisioning.kb.io" denied the request`))
	g.Expect(out).To(ContainSubstring("provisioningIP"))

	out, err = apply("  provisioningNetwork: Disabled\n")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(co(cond("Available")), 2*time.Minute, time.Second).Should(Equal("True DeployComplete"))
	out, err = kubectl(admin, "-n", "openshift-machine-api", "get", "deployment", "metal3",
		"-o", `jsonpath={.metadata.annotations.baremetal\.openshift\.io/owned}|{.status.availableReplicas}|{.spec.template.spec.containers[0].args}`)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	parts := strings.SplitN(out, "|", 3)
	g.Expect(parts).To(HaveLen(3), out)
	g.Expect(parts[1]).To(Equal("1"), "the metal3 pod (the host engine, run for real) is Ready: %s", out)
	g.Expect(parts[2]).To(ContainSubstring("--components=host-engine"))

	// Off the supported platforms it stands down.
	out, err = kubectl(admin, "patch", "infrastructure", "cluster", "--subresource=status", "--type=merge",
		"-p", `{"status":{"platformStatus":{"type":"External"}}}`)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(co(cond("Disabled")), time.Minute, time.Second).Should(Equal("True UnsupportedPlatform"))
	g.Expect(co(cond("Available"))()).To(Equal("True AsExpected"))
}
