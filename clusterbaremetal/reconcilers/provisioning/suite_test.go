package provisioning_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/clusterbaremetal"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/metal3"
	"github.com/metalshift/metalshift/clusterbaremetal/reconcilers/provisioning"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// clk is the operators' clock: transitions are stamped and the rollout
	// timeout is counted at its time, which only the tests move.
	clk = clocktesting.NewFakeClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	// managers counts the operators' managers started.
	managers int
)

// TestMain starts envtest with the operator's component as the hub runs it
// without --baremetal-operator: the Provisioning webhook only. Each test
// runs the controller in a manager of its own (runOperator), so that a test
// can replace the operator by one of another version, as an upgrade does.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{Components: []component.Component{clusterbaremetal.Component()}}))
}

// runOperator starts the operator at version in a manager of its own,
// stopped when the test ends (or by the returned function).
func runOperator(t *testing.T, version string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := component.Component{Name: "baremetal-operator-controller", Setup: func(ctx context.Context, hub *component.Hub) error {
		return clusterbaremetal.Setup(ctx, hub, clusterbaremetal.Options{Enabled: true, Version: version, OperandImage: "example.com/metalshift/manager:" + version})
	}}
	managers++ // a manager's name is unique in the process (it names its informers)
	mgr, err := component.NewManager(ctx, env.Config, fmt.Sprintf("operator-%d", managers), component.Options{RestartableInProcess: true, Clock: clk},
		[]component.Component{clusterbaremetal.Component(), c})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// reset leaves no Provisioning, metal3 Deployment or ClusterOperator, and
// the platform set to platform. Run it while no operator runs.
func reset(t *testing.T, platform configv1.PlatformType) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metal3.Namespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	prov := &metal3v1.Provisioning{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: metal3v1.ProvisioningSingletonName}, prov); err == nil {
		prov.Finalizers = nil
		g.Expect(env.Client.Update(ctx, prov)).To(Succeed())
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, prov))).To(Succeed())
	}
	g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: metal3.Namespace, Name: metal3.DeploymentName}}))).To(Succeed())
	g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: provisioning.ClusterOperatorName}}))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: metal3v1.ProvisioningSingletonName}, &metal3v1.Provisioning{}))
	}).Should(BeTrue())
	setPlatform(t, platform)
}

// setPlatform creates or updates the Infrastructure "cluster" with platform.
func setPlatform(t *testing.T, platform configv1.PlatformType) {
	t.Helper()
	ctx := context.Background()
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: configv1.InfrastructureName}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(infra), infra); apierrors.IsNotFound(err) {
		if err := env.Client.Create(ctx, infra); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	infra.Status.Platform = platform
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: platform}
	if err := env.Client.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
}

// markRolledOut writes the metal3 Deployment's status as the Deployment
// controller would once its pods of the current generation are available:
// envtest runs no kube-controller-manager, and no kubelet would run the pods.
func markRolledOut(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: metal3.Namespace, Name: metal3.DeploymentName}, d); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
				Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."}},
		}
		return env.Client.Status().Update(ctx, d)
	}).Should(Succeed())
}

// poke touches the Provisioning (an annotation, not its spec) so that the
// operator reconciles, e.g. after the test moved the clock.
func poke(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		prov := &metal3v1.Provisioning{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: metal3v1.ProvisioningSingletonName}, prov); err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&prov.ObjectMeta, "test/poke", fmt.Sprint(time.Now().UnixNano()))
		return env.Client.Update(context.Background(), prov)
	}).Should(Succeed())
}

// clusterOperator returns the baremetal ClusterOperator's conditions by
// type, as "Status Reason: Message".
func clusterOperator(g Gomega) map[string]string {
	co := &configv1.ClusterOperator{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: provisioning.ClusterOperatorName}, co)).To(Succeed())
	out := map[string]string{}
	for _, c := range co.Status.Conditions {
		out[c.Type] = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return out
}

// operatorVersion returns the version the ClusterOperator reports.
func operatorVersion(g Gomega) string {
	co := &configv1.ClusterOperator{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: provisioning.ClusterOperatorName}, co)).To(Succeed())
	for _, v := range co.Status.Versions {
		if v.Name == "operator" {
			return v.Version
		}
	}
	return ""
}

// deployment returns the metal3 Deployment.
func deployment(g Gomega) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: metal3.Namespace, Name: metal3.DeploymentName}, d)).To(Succeed())
	return d
}

// validManaged is a valid Managed spec.
func validManaged() metal3v1.ProvisioningSpec {
	return metal3v1.ProvisioningSpec{
		ProvisioningInterface: "enp1s0", ProvisioningIP: "172.22.0.3", ProvisioningNetworkCIDR: "172.22.0.0/24",
		ProvisioningDHCPRange: "172.22.0.10,172.22.0.100", ProvisioningNetwork: metal3v1.ProvisioningNetworkManaged,
	}
}

func newProvisioning(spec metal3v1.ProvisioningSpec) *metal3v1.Provisioning {
	return &metal3v1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3v1.ProvisioningSingletonName}, Spec: spec}
}
