package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	operatormanifests "github.com/metalshift/metalshift/clusterbaremetal/manifests"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/internal/manifest"
	"github.com/metalshift/metalshift/localcp"
)

// baremetalOperator is the ClusterOperator the bare-metal operator reports.
const baremetalOperator = "baremetal"

// runsOperator tells whether the cluster runs the bare-metal operator for
// real (Options.Runtime), rather than simulating its ClusterOperator.
func (c *Cluster) runsOperator() bool {
	return c.w.opts.Runtime != nil && c.w.opts.APIServer == KubeAPIServer
}

// kubeControllerManagerControllers are the controllers the installed
// cluster's workloads need: Deployments to ReplicaSets to Pods. (Pods'
// addresses are loopback ones, which Endpoints may not hold; see
// reachWebhooks.)
var kubeControllerManagerControllers = []string{"deployment-controller", "replicaset-controller"}

// startControllerManager starts the cluster's kube-controller-manager with
// the admin's credentials.
func (c *Cluster) startControllerManager(ctx context.Context) error {
	kubeconfig := filepath.Join(c.dir, "admin.kubeconfig")
	cfg, err := clientcmd.Load(c.files.adminKubeconfig)
	if err != nil {
		return err
	}
	// The cluster's processes do not resolve the simulated DNS: the API's
	// address instead of its name.
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + net.JoinHostPort(c.vip, strconv.Itoa(APIPort))
	}
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return err
	}
	c.controllerManager, err = localcp.StartChild(ctx, localcp.ChildOptions{
		Name: "kube-controller-manager", BinDir: c.w.opts.BinDir, Dir: c.dir,
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=" + strings.Join(kubeControllerManagerControllers, ","),
			"--leader-elect=false", "--secure-port=0", "--v=0",
		},
		StopTimeout: 2 * time.Second,
	})
	return err
}

// workloadLoop schedules Pods and plays OpenShift's service-ca operator.
func (c *Cluster) workloadLoop(ctx context.Context) {
	for {
		for _, step := range []struct {
			what string
			f    func(context.Context) error
		}{{"scheduler", c.schedule}, {"service-ca", c.serviceCA}} {
			if err := step.f(ctx); err != nil && ctx.Err() == nil {
				c.w.opts.Logf("Cluster %s: %s: %v", c.name, step.what, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.poll(500 * time.Millisecond)):
		}
	}
}

// installOperator applies the bare-metal operator's manifests, as the
// cluster-version operator applies a release payload: metal3.io's CRDs,
// then the operator's objects with the release's version.
func (c *Cluster) installOperator(ctx context.Context) error {
	crds, err := config.CRDs("crd/bases/metal3.io_*.yaml")
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := c.client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := c.waitEstablished(ctx, crd.Name); err != nil {
			return err
		}
	}
	payload := strings.ReplaceAll(string(operatormanifests.YAML), operatormanifests.VersionPlaceholder, c.files.release)
	objs, err := manifest.Decode([]byte(payload))
	if err != nil {
		return err
	}
	if err := c.reachWebhooks(objs); err != nil {
		return err
	}
	for _, u := range objs {
		if err := c.client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the bare-metal operator's %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// reachWebhooks points each webhook of the validating webhook
// configurations in objs that names a Service at that Service's target
// port on the cluster's address, where the Pods' containers listen: the
// simulated network has neither Service addresses nor Endpoints of
// loopback Pods for the kube-apiserver to resolve. (The service CA adds
// the address to the serving certificates it issues.)
func (c *Cluster) reachWebhooks(objs []*unstructured.Unstructured) error {
	targetPort := map[string]int{} // namespace/name/port → target port
	for _, u := range objs {
		if u.GetKind() != "Service" {
			continue
		}
		svc := &corev1.Service{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc); err != nil {
			return err
		}
		for _, p := range svc.Spec.Ports {
			targetPort[fmt.Sprintf("%s/%s/%d", svc.Namespace, svc.Name, p.Port)] = p.TargetPort.IntValue()
		}
	}
	for _, u := range objs {
		if u.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg); err != nil {
			return err
		}
		for i := range cfg.Webhooks {
			cc := &cfg.Webhooks[i].ClientConfig
			if cc.Service == nil {
				continue
			}
			port := ptr.Deref(cc.Service.Port, 443)
			target, ok := targetPort[fmt.Sprintf("%s/%s/%d", cc.Service.Namespace, cc.Service.Name, port)]
			if !ok {
				return fmt.Errorf("webhook %s: service %s/%s has no port %d in the payload", cfg.Webhooks[i].Name, cc.Service.Namespace, cc.Service.Name, port)
			}
			cc.URL = ptr.To("https://" + net.JoinHostPort(c.vip, strconv.Itoa(target)) + ptr.Deref(cc.Service.Path, "/"))
			cc.Service = nil
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
		if err != nil {
			return err
		}
		u.Object = obj
	}
	return nil
}

// installInfrastructure creates the Infrastructure object "cluster", whose
// platform the install-config names.
func (c *Cluster) installInfrastructure(ctx context.Context) error {
	ic := c.files.installConfig
	platform := configv1.NonePlatformType
	switch {
	case ic.Platform.BareMetal != nil:
		platform = configv1.BareMetalPlatformType
	case ic.Platform.EquinixMetal != nil:
		platform = configv1.EquinixMetalPlatformType
	}
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: configv1.InfrastructureName},
		Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: platform}}}
	if err := c.client.Create(ctx, infra); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating Infrastructure %s: %w", infra.Name, err)
	}
	api := func(host string) string { return "https://" + net.JoinHostPort(host, strconv.Itoa(APIPort)) }
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName: ic.Metadata.Name, Platform: platform,
		PlatformStatus: &configv1.PlatformStatus{Type: platform},
		APIServerURL:   api(c.names[0]), APIServerInternalURL: api(c.names[1]),
		EtcdDiscoveryDomain:  ic.ClusterDomain(),
		ControlPlaneTopology: "HighlyAvailable", InfrastructureTopology: "HighlyAvailable",
	}
	if ic.ControlPlaneReplicas() == 1 {
		infra.Status.ControlPlaneTopology, infra.Status.InfrastructureTopology = "SingleReplica", "SingleReplica"
	}
	if bm := ic.Platform.BareMetal; bm != nil {
		infra.Status.PlatformStatus.BareMetal = &configv1.BareMetalPlatformStatus{
			APIServerInternalIPs: bm.APIVIPs, IngressIPs: bm.IngressVIPs,
		}
		if len(bm.APIVIPs) > 0 {
			infra.Status.PlatformStatus.BareMetal.APIServerInternalIP = bm.APIVIPs[0]
		}
		if len(bm.IngressVIPs) > 0 {
			infra.Status.PlatformStatus.BareMetal.IngressIP = bm.IngressVIPs[0]
		}
	}
	if em := ic.Platform.EquinixMetal; em != nil {
		infra.Status.PlatformStatus.EquinixMetal = &configv1.EquinixMetalPlatformStatus{APIServerInternalIP: em.APIVIP, IngressIP: em.IngressVIP}
	}
	return c.client.Status().Update(ctx, infra)
}
