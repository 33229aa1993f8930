package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	kubeadmsetup "sigs.k8s.io/cluster-api/bootstrap/kubeadm/setup"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	kcpsetup "sigs.k8s.io/cluster-api/controlplane/kubeadm/setup"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	coresetup "sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/test/infrastructure/container"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	devcontrollers "sigs.k8s.io/cluster-api/test/infrastructure/docker/controllers"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
	"sigs.k8s.io/cluster-api/util/index"
)

// kubernetesVersion is the version of the anchor's clusters.
const kubernetesVersion = "v1.34.0"

// connectionRetry is how soon the ClusterCache connects to a workload
// cluster again after a failure, as `metalshift hub up` sets it.
const connectionRetry = 2 * time.Second

// concurrency of every controller, as metalshift's hub runs Cluster API core.
const concurrency = 10

// runInstall installs n clusters and returns the time from their creation
// until every Machine runs a Node.
func runInstall(ctx context.Context, n int, assets string) (time.Duration, error) {
	dirs, err := crdDirs()
	if err != nil {
		return 0, err
	}
	crds, err := contractCRDs(dirs)
	if err != nil {
		return 0, err
	}
	env := &envtest.Environment{CRDs: crds, BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		return 0, fmt.Errorf("starting envtest: %w", err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = 200, 400
	scheme, err := hubScheme()
	if err != nil {
		return 0, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// Core's cache options drop Secrets' data, which the kubeadm
		// providers, in their own processes, read: the anchor runs them all
		// in one with the default cache.
		Client: coresetup.ManagerClientOptions(),
	})
	if err != nil {
		return 0, err
	}
	if err := setupControllers(ctx, mgr); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return 0, fmt.Errorf("the manager's cache did not sync")
	}
	c := mgr.GetClient()
	start := time.Now()
	for i := range n {
		for _, o := range clusterObjects(fmt.Sprintf("anchor-%d", i)) {
			if err := c.Create(ctx, o); err != nil {
				return 0, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
			}
		}
	}
	return waitRunning(ctx, c, 2*n, start)
}

// waitRunning polls until want Machines run a Node, and returns the time
// since start.
func waitRunning(ctx context.Context, c client.Client, want int, start time.Time) (time.Duration, error) {
	last := ""
	for {
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list); err != nil {
			return 0, err
		}
		running, phases := 0, map[string]int{}
		for _, m := range list.Items {
			phases[m.Status.Phase]++
			if m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined() {
				running++
			}
		}
		if running == want {
			return time.Since(start), nil
		}
		if s := fmt.Sprint(phases); s != last {
			fmt.Fprintf(os.Stderr, "%s: %d of %d Machines running, phases %s\n", time.Since(start).Round(time.Second), running, want, s)
			last = s
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d Machines running, phases %v: %w", running, want, phases, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// crdDirs are the CRDs of Cluster API core, the kubeadm providers and the
// in-memory (Dev*) provider, from the module cache.
func crdDirs() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-json", "sigs.k8s.io/cluster-api", "sigs.k8s.io/cluster-api/test").Output()
	if err != nil {
		return nil, fmt.Errorf("finding Cluster API's modules (run in hack/capi-inmemory-bench): %w", err)
	}
	dirs := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var m struct{ Path, Dir string }
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		dirs[m.Path] = m.Dir
	}
	capi, test := dirs["sigs.k8s.io/cluster-api"], dirs["sigs.k8s.io/cluster-api/test"]
	if capi == "" || test == "" {
		return nil, fmt.Errorf("cluster-api modules not downloaded: %v", dirs)
	}
	return []string{
		filepath.Join(capi, "core", "config", "crd", "bases"),
		filepath.Join(capi, "bootstrap", "kubeadm", "config", "crd", "bases"),
		filepath.Join(capi, "controlplane", "kubeadm", "config", "crd", "bases"),
		filepath.Join(test, "infrastructure", "docker", "config", "crd", "bases"),
	}, nil
}

// contractCRDs reads the CRDs in dirs and labels each with the Cluster API
// contract its v1beta2 version implements, as the providers' released
// manifests are labelled (the bases are not): core resolves references
// through that label.
func contractCRDs(dirs []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no CRD in %s", dir)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(data, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Labels == nil {
				crd.Labels = map[string]string{}
			}
			crd.Labels[clusterv1.GroupVersion.String()] = "v1beta2"
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

func hubScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme,
		bootstrapv1.AddToScheme, controlplanev1.AddToScheme, infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// inMemoryScheme is what the in-memory provider's clusters hold, as its
// main registers it.
func inMemoryScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = cloudv1.AddToScheme(s)
	_ = corev1.AddToScheme(s)
	_ = appsv1.AddToScheme(s)
	_ = rbacv1.AddToScheme(s)
	_ = storagev1.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = policyv1.AddToScheme(s)
	return s
}

// setupControllers wires Cluster API core, the kubeadm bootstrap and
// control-plane providers and the in-memory provider into mgr, as their
// own mains do, without webhooks (the objects are created complete).
func setupControllers(ctx context.Context, mgr ctrl.Manager) error {
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return err
	}
	secrets, err := coresetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return err
	}
	kcpSecrets, err := kcpsetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return err
	}
	kubeadmSecrets, err := kubeadmsetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return err
	}
	opts := controller.Options{MaxConcurrentReconciles: concurrency}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        coresetup.ClusterCacheCacheOptions(),
		Client:       coresetup.ClusterCacheClientOptions("capi-inmemory-bench", 20, 30),
	}, opts)
	if err != nil {
		return err
	}
	// As metalshift's embedded hub (`hub up`): clusters come up while the
	// hub watches, so it connects again soon after a refusal.
	cc.(interface{ SetConnectionCreationRetryInterval(time.Duration) }).SetConnectionCreationRetryInterval(connectionRetry)
	imm := inmemoryruntime.NewManager(inMemoryScheme())
	if err := imm.Start(ctx); err != nil {
		return err
	}
	mux, err := inmemoryserver.NewWorkloadClustersMux(imm, "127.0.0.1")
	if err != nil {
		return err
	}
	// The Dev* controllers also drive Docker machines; this bench makes
	// none, and gives them Cluster API's fake container runtime.
	cr, err := container.NewFakeClient()
	if err != nil {
		return err
	}
	c, r := mgr.GetClient(), mgr.GetAPIReader()
	for name, setup := range map[string]func() error{
		"Cluster": func() error {
			return (&cluster.Reconciler{Client: c, APIReader: r, ClusterCache: cc, RemoteConnectionGracePeriod: 50 * time.Second}).SetupWithManager(ctx, mgr, opts)
		},
		"Machine": func() error {
			return (&machine.Reconciler{Client: c, APIReader: r, ClusterCache: cc, RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, opts)
		},
		"MachineSet": func() error {
			return (&machineset.Reconciler{Client: c, APIReader: r, ClusterCache: cc,
				PreflightChecks: sets.Set[clusterv1.MachineSetPreflightCheck]{}}).SetupWithManager(ctx, mgr, opts)
		},
		"MachineDeployment": func() error {
			return (&machinedeployment.Reconciler{Client: c, APIReader: r}).SetupWithManager(ctx, mgr, opts)
		},
		"KubeadmConfig": func() error {
			return (&kubeadmconfig.Reconciler{Client: c, SecretCachingClient: kubeadmSecrets, APIReader: r, ClusterCache: cc,
				TokenTTL: kubeadmconfig.DefaultTokenTTL}).SetupWithManager(ctx, mgr, opts)
		},
		"KubeadmControlPlane": func() error {
			return (&kubeadmcontrolplane.Reconciler{Client: c, APIReader: r, SecretCachingClient: kcpSecrets, ClusterCache: cc,
				EtcdDialTimeout: 10 * time.Second, EtcdCallTimeout: 15 * time.Second, EtcdLogger: zap.NewNop(),
				RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, opts)
		},
		"DevCluster": func() error {
			return (&devcontrollers.DevClusterReconciler{Client: c, ContainerRuntime: cr, InMemoryManager: imm, APIServerMux: mux}).SetupWithManager(ctx, mgr, opts)
		},
		"DevMachine": func() error {
			return (&devcontrollers.DevMachineReconciler{Client: c, ContainerRuntime: cr, ClusterCache: cc, InMemoryManager: imm, APIServerMux: mux}).SetupWithManager(ctx, mgr, opts)
		},
	} {
		if err := setup(); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", name, err)
		}
	}
	return nil
}

// clusterObjects are one cluster of a KubeadmControlPlane of one machine
// and a MachineDeployment of one worker, on in-memory machines that
// provision at once, in namespace name.
func clusterObjects(name string) []client.Object {
	meta := func(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: name, Name: n} }
	infra := func(kind, n string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: kind, Name: n}
	}
	now := infrav1.CommonProvisioningSettings{StartupDuration: metav1.Duration{}}
	mdLabels := map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.MachineDeploymentNameLabel: "md-0"}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		// The provider writes an annotation into the DevCluster's map and
		// does not make it: the anchor's DevClusters have one already.
		&infrav1.DevCluster{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: name, Annotations: map[string]string{"bench.metalshift.io/anchor": ""}}, Spec: infrav1.DevClusterSpec{Backend: infrav1.DevClusterBackendSpec{InMemory: &infrav1.InMemoryClusterBackendSpec{}}}},
		&infrav1.DevMachineTemplate{ObjectMeta: meta("machines"), Spec: infrav1.DevMachineTemplateSpec{Template: infrav1.DevMachineTemplateResource{
			Spec: infrav1.DevMachineSpec{Backend: infrav1.DevMachineBackendSpec{InMemory: &infrav1.InMemoryMachineBackendSpec{
				VM: &infrav1.InMemoryVMSpec{Provisioning: now}, Node: &infrav1.InMemoryNodeSpec{Provisioning: now},
				APIServer: &infrav1.InMemoryAPIServerSpec{Provisioning: now}, Etcd: &infrav1.InMemoryEtcdSpec{Provisioning: now},
			}}},
		}}},
		&controlplanev1.KubeadmControlPlane{ObjectMeta: meta(name), Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](1), Version: kubernetesVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: infra("DevMachineTemplate", "machines"),
			}},
		}},
		&bootstrapv1.KubeadmConfigTemplate{ObjectMeta: meta("workers"), Spec: bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{
			Spec: bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: bootstrapv1.NodeRegistrationOptions{Name: "{{ ds.meta_data.local_hostname }}"}}},
		}}},
		&clusterv1.MachineDeployment{ObjectMeta: meta("md-0"), Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: name, Replicas: ptr.To[int32](1),
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))},
			}},
			Selector: metav1.LabelSelector{MatchLabels: mdLabels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: mdLabels}, Spec: clusterv1.MachineSpec{
				ClusterName: name, Version: kubernetesVersion,
				Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: "workers"}},
				InfrastructureRef: infra("DevMachineTemplate", "machines"),
			}},
		}},
		&clusterv1.Cluster{ObjectMeta: meta(name), Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.128.0.0/12"}},
			},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: name},
			InfrastructureRef: infra("DevCluster", name),
		}},
	}
}
