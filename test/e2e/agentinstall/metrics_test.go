package agentinstall

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/internal/testenv"
)

// The hub's install duration histograms.
const (
	aciInstallHistogram    = "metalshift_agentclusterinstall_install_duration_seconds"
	hostProvisionHistogram = "metalshift_baremetalhost_provision_duration_seconds"
)

// scrapeHub reads the hub manager's metrics endpoint, as Prometheus would.
func scrapeHub(g Gomega) testenv.Metrics {
	m, err := testenv.Scrape(context.Background(), "http://"+metricsAddr+"/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	return m
}

// expectInstallMetrics checks the hub's metrics after aci installed with
// hosts provisioned (each from provisioning to provisioned once), against
// the scrape before: each install and provisioning observed once, with the
// duration the objects' own timestamps tell; and the gauges of hosts,
// Agents and installs equal to the counts listed from the API, every known
// state reported.
func expectInstallMetrics(t *testing.T, before testenv.Metrics, aci *hiveextv1.AgentClusterInstall, hosts ...*metal3v1.BareMetalHost) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	aciCount0, aciSum0 := before.Histogram(aciInstallHistogram)
	hostCount0, hostSum0 := before.Histogram(hostProvisionHistogram)
	var m testenv.Metrics
	g.Eventually(func(g Gomega) {
		m = scrapeHub(g)
		count, _ := m.Histogram(aciInstallHistogram)
		g.Expect(count).To(Equal(aciCount0+1), "installs observed")
		count, _ = m.Histogram(hostProvisionHistogram)
		g.Expect(count).To(Equal(hostCount0+uint64(len(hosts))), "provisionings observed")
	}).Should(Succeed())

	state := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: aci.Namespace, Name: rec.InstallStateName(aci)}, state)).To(Succeed())
	var completed float64
	for _, c := range aci.Status.Conditions {
		if c.Type == "Completed" {
			completed = c.LastTransitionTime.Sub(state.CreationTimestamp.Time).Seconds()
		}
	}
	_, sum := m.Histogram(aciInstallHistogram)
	g.Expect(sum-aciSum0).To(Equal(completed), "from the install-state Secret's creation to Completed")
	var provisioned float64
	for _, h := range hosts {
		op := h.Status.OperationHistory.Provision
		provisioned += op.End.Sub(op.Start.Time).Seconds()
	}
	_, sum = m.Histogram(hostProvisionHistogram)
	g.Expect(sum-hostSum0).To(Equal(provisioned), "status.operationHistory.provision")

	// The gauges converge on the API's counts (the cache follows the API).
	g.Eventually(func(g Gomega) {
		m := scrapeHub(g)
		g.Expect(m.Counts("metalshift_baremetalhosts", "state")).To(Equal(apiHostCounts(g)))
		g.Expect(m.Counts("metalshift_agents", "state", "approved")).To(Equal(apiAgentCounts(g)))
		g.Expect(m.Counts("metalshift_agentclusterinstalls", "state")).To(Equal(apiACICounts(g)))
	}).Should(Succeed())
	m = scrapeHub(g)
	g.Expect(m.Series("metalshift_baremetalhosts", "state")).To(ContainElements("none", "registering", "provisioned", "deprovisioning"))
	g.Expect(m.Series("metalshift_baremetalhosts_operational_status", "status")).To(ContainElements("OK", "error", "detached"))
	g.Expect(m.Series("metalshift_baremetalhosts_errors", "type")).To(ContainElements("registration error", "provisioning error"))
	g.Expect(m.Series("metalshift_agents", "state", "approved")).To(ContainElements("discovering/false", "known/true", "installed/true"))
	g.Expect(m.Series("metalshift_agentclusterinstalls", "state")).To(ContainElements("ready", "installing", "installed", "error"))
}

func apiHostCounts(g Gomega) map[string]float64 {
	list := &metal3v1.BareMetalHostList{}
	g.Expect(env.Client.List(context.Background(), list)).To(Succeed())
	out := map[string]float64{}
	for _, h := range list.Items {
		out[noneIfEmpty(string(h.Status.Provisioning.State))]++
	}
	return out
}

func apiAgentCounts(g Gomega) map[string]float64 {
	list := &agentinstallv1.AgentList{}
	g.Expect(env.Client.List(context.Background(), list)).To(Succeed())
	out := map[string]float64{}
	for _, a := range list.Items {
		out[fmt.Sprintf("%s/%t", noneIfEmpty(a.Status.DebugInfo.State), a.Spec.Approved)]++
	}
	return out
}

func apiACICounts(g Gomega) map[string]float64 {
	list := &hiveextv1.AgentClusterInstallList{}
	g.Expect(env.Client.List(context.Background(), list)).To(Succeed())
	out := map[string]float64{}
	for _, a := range list.Items {
		out[noneIfEmpty(a.Status.DebugInfo.State)]++
	}
	return out
}

// noneIfEmpty is a state as the gauges label it: "none" before the first.
func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
