package metrics

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/metalshift/metalshift/internal/testenv"
)

// TestReplicaWithoutLeadership: a replica that is not the leader (another
// holds the Lease) reports the gauges of the objects in the API, from its
// own cache; once it stops, its collectors are unregistered, so that a
// manager started after it in the process registers its own.
func TestReplicaWithoutLeadership(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	g := NewWithT(t)
	ctx := context.Background()
	env, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ns := env.Namespace(t)

	const lease = "metrics-replica"
	g.Expect(env.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	})).To(Succeed())
	for name, state := range map[string]string{"a-1": "a", "a-2": "a", "b-1": "b"} {
		g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"state": state}}})).To(Succeed())
	}

	// The metrics server takes no listener: a reserved port.
	addr := testenv.ReservedAddr(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Client.Scheme(), Metrics: metricsserver.Options{BindAddress: addr},
		HealthProbeBindAddress: "0", LeaderElection: true, LeaderElectionID: lease, LeaderElectionNamespace: ns})
	g.Expect(err).NotTo(HaveOccurred())
	gauge := Gauge{Name: "metalshift_test_configmaps", Help: "ConfigMaps by state label.", Labels: []string{"state"}, Known: [][]string{{"a"}, {"b"}, {"c"}}}
	collector := NewStateCollector(mgr.GetCache(), func(ctx context.Context, r client.Reader, add func(int, ...string)) error {
		list := &corev1.ConfigMapList{}
		if err := r.List(ctx, list, client.InNamespace(ns), client.HasLabels{"state"}); err != nil {
			return err
		}
		for _, cm := range list.Items {
			add(0, cm.Labels["state"])
		}
		return nil
	}, gauge)
	g.Expect(Add(mgr, []client.Object{&corev1.ConfigMap{}}, collector)).To(Succeed())
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()

	g.Eventually(func(g Gomega) {
		m, err := testenv.Scrape(ctx, "http://"+addr+"/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m.Counts(gauge.Name, "state")).To(Equal(map[string]float64{"a": 2, "b": 1}))
		g.Expect(m.Series(gauge.Name, "state")).To(ContainElement("c"), "known states are reported at 0")
	}).Should(Succeed())
	g.Expect(mgr.Elected()).NotTo(BeClosed(), "the replica is not the leader")

	stop()
	g.Expect(<-done).To(Succeed())
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		g.Expect(f.GetName()).NotTo(Equal(gauge.Name), "unregistered once the manager stopped")
	}
}
