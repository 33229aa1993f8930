package installer

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/internal/manifest"
)

// Files and directories of an install dir.
const (
	InstallConfigFile = "install-config.yaml"
	ClusterAPIDir     = "cluster-api"
	ManifestsDir      = "manifests"
	OpenShiftDir      = "openshift"
	AuthDir           = "auth"
	StateDir          = ".metalshift"
)

// Labels the installer puts on what it creates.
const (
	// ManifestsLabel selects a cluster's wrapped manifests.
	ManifestsLabel = "install.metalshift.io/manifests"
	// RoleLabel on a BareMetalHost carries platform.baremetal.hosts[].role.
	RoleLabel = "install.metalshift.io/role"
)

// LoadInstallConfig reads and validates <dir>/install-config.yaml.
func LoadInstallConfig(dir string) (*installconfig.InstallConfig, []byte, error) {
	raw, err := os.ReadFile(filepath.Join(dir, InstallConfigFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%w; `metalshift create install-config --dir %s` writes one", err, dir)
	}
	ic, err := installconfig.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	if errs := ic.Validate(); len(errs) > 0 {
		return nil, nil, &InvalidError{Errs: errs}
	}
	return ic, raw, nil
}

// InvalidError lists every problem of an install-config.
type InvalidError struct{ Errs field.ErrorList }

func (e *InvalidError) Error() string {
	lines := make([]string, 0, len(e.Errs))
	for _, err := range e.Errs {
		lines = append(lines, "  "+err.Error())
	}
	return fmt.Sprintf("invalid install-config (%d problems):\n%s", len(e.Errs), strings.Join(lines, "\n"))
}

// CreateManifests writes the hub objects to <dir>/cluster-api, default
// manifests to <dir>/manifests and <dir>/openshift (kept when present), the
// cluster's root CA to <dir>/.metalshift and the admin kubeconfig to
// <dir>/auth/kubeconfig. Everything can be edited before `create cluster`.
//
// On Equinix Metal it first reserves the cluster's elastic IPs, unless the
// install-config has them, and writes them into it (out says so).
func CreateManifests(ctx context.Context, dir string, out io.Writer) error {
	ic, raw, err := LoadInstallConfig(dir)
	if err != nil {
		return err
	}
	if ic.Platform.EquinixMetal != nil {
		ctx, cancel := context.WithTimeout(ctx, equinixTimeout)
		raw, err = reserveEquinixVIPs(ctx, dir, ic, raw, out)
		cancel()
		if err != nil {
			return err
		}
	}
	ca, kubeconfig, err := ensureAuth(dir, ic)
	if err != nil {
		return err
	}
	objs, err := HubObjects(ic, raw, ca, kubeconfig)
	if err != nil {
		return err
	}
	apiDir := filepath.Join(dir, ClusterAPIDir)
	if err := os.MkdirAll(apiDir, 0o700); err != nil {
		return err
	}
	for i, o := range objs {
		data, err := manifest.Marshal(o)
		if err != nil {
			return err
		}
		kind := strings.ToLower(o.GetObjectKind().GroupVersionKind().Kind)
		name := fmt.Sprintf("%02d_%s_%s.yaml", i, kind, o.GetName())
		if err := os.WriteFile(filepath.Join(apiDir, name), data, 0o600); err != nil {
			return err
		}
	}
	return writeDefaultManifests(dir, ic, raw)
}

// ensureAuth creates the root CA and the admin kubeconfig once per install dir.
func ensureAuth(dir string, ic *installconfig.InstallConfig) (certs.KeyPair, []byte, error) {
	state := filepath.Join(dir, StateDir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return certs.KeyPair{}, nil, err
	}
	var ca certs.KeyPair
	crt, err1 := os.ReadFile(filepath.Join(state, "root-ca.crt"))
	key, err2 := os.ReadFile(filepath.Join(state, "root-ca.key"))
	if err1 == nil && err2 == nil {
		ca = certs.KeyPair{Cert: crt, Key: key}
	} else {
		if ca, err1 = certs.NewCA("root-ca"); err1 != nil {
			return ca, nil, err1
		}
		if err := os.WriteFile(filepath.Join(state, "root-ca.crt"), ca.Cert, 0o600); err != nil {
			return ca, nil, err
		}
		if err := os.WriteFile(filepath.Join(state, "root-ca.key"), ca.Key, 0o600); err != nil {
			return ca, nil, err
		}
	}
	path := filepath.Join(dir, AuthDir, "kubeconfig")
	if data, err := os.ReadFile(path); err == nil {
		return ca, data, nil
	}
	admin, err := certs.Issue(ca, certs.Spec{CommonName: "system:admin", Organizations: []string{"system:masters"}})
	if err != nil {
		return ca, nil, err
	}
	cfg := clientcmdapi.NewConfig()
	name := ic.Metadata.Name
	// The API VIP rather than api.<cluster>.<baseDomain>, so that the
	// kubeconfig works without DNS records for the cluster.
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(ic.APIVIP(), "6443"), CertificateAuthorityData: ca.Cert}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.Cert, ClientKeyData: admin.Key}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: name, AuthInfo: "admin"}
	cfg.CurrentContext = "admin"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return ca, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return ca, nil, err
	}
	return ca, data, os.WriteFile(path, data, 0o600)
}

// HubObjects are the objects applied to the hub, in order. On Equinix
// Metal they hold the API key (read from its file or the environment) and
// the TSIG key.
func HubObjects(ic *installconfig.InstallConfig, raw []byte, ca certs.KeyPair, kubeconfig []byte) ([]client.Object, error) {
	name := ic.Metadata.Name
	ns := name
	version, kube := ic.Version(), ic.KubernetesVersion()
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: name}}
	}
	tm := func(apiVersion, kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
	}
	infraGV, cpGV, bsGV := infrav1.GroupVersion.String(), controlplanev1.GroupVersion.String(), bootstrapv1.GroupVersion.String()

	objs := []client.Object{&corev1.Namespace{TypeMeta: tm("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: ns}}}
	var hosts []installconfig.Host
	if bm := ic.Platform.BareMetal; bm != nil {
		hosts = bm.Hosts
	}
	for _, h := range hosts {
		secret := &corev1.Secret{TypeMeta: tm("v1", "Secret"), ObjectMeta: meta(h.Name + "-bmc-secret"), Type: corev1.SecretTypeOpaque,
			StringData: map[string]string{"username": h.BMC.Username, "password": h.BMC.Password}}
		bootMode := metal3v1.BootMode(h.BootMode)
		if bootMode == "" {
			bootMode = metal3v1.UEFI
		}
		host := &metal3v1.BareMetalHost{TypeMeta: tm(metal3v1.GroupVersion.String(), "BareMetalHost"), ObjectMeta: meta(h.Name),
			Spec: metal3v1.BareMetalHostSpec{
				BMC:            metal3v1.BMCDetails{Address: h.BMC.Address, CredentialsName: secret.Name, DisableCertificateVerification: h.BMC.DisableCertificateVerification},
				BootMACAddress: bootMAC(h.BootMACAddress), BootMode: bootMode,
			}}
		if h.Role != "" {
			host.Labels[RoleLabel] = h.Role
		}
		if rh := h.RootDeviceHints; rh != nil {
			host.Spec.RootDeviceHints = &metal3v1.RootDeviceHints{DeviceName: rh.DeviceName, MinSizeGigabytes: rh.MinSizeGigabytes,
				Model: rh.Model, SerialNumber: rh.SerialNumber, WWN: rh.WWN, Rotational: rh.Rotational}
		}
		objs = append(objs, secret, host)
	}
	icSecret := &corev1.Secret{TypeMeta: tm("v1", "Secret"), ObjectMeta: meta(name + "-install-config"),
		Data: map[string][]byte{controlplanev1.InstallConfigKey: raw}}
	state := &corev1.Secret{TypeMeta: tm("v1", "Secret"), ObjectMeta: meta(name + "-install-state"),
		Data: map[string][]byte{
			controlplanev1.InstallStateCACertKey: ca.Cert, controlplanev1.InstallStateCAKeyKey: ca.Key,
			controlplanev1.InstallStateKubeconfigKey: kubeconfig,
		}}
	objs = append(objs, icSecret, state)
	// The platform's infrastructure: its cluster and the masters' and the
	// workers' machine templates.
	infraKind, templateKind := "MetalCluster", "MetalMachineTemplate"
	var infraName, mastersName, workersName string
	if ic.Platform.EquinixMetal != nil {
		infraKind, templateKind = "EquinixMetalCluster", "EquinixMetalMachineTemplate"
		eobjs, err := equinixObjects(ic, meta, tm)
		if err != nil {
			return nil, err
		}
		objs = append(objs, eobjs...)
		infraName, mastersName, workersName = name, name+"-master", name+"-worker"
	} else {
		mc := &infrav1.MetalCluster{TypeMeta: tm(infraGV, "MetalCluster"), ObjectMeta: meta(name),
			Spec: infrav1.MetalClusterSpec{ControlPlaneEndpoint: infrav1.APIEndpoint{Host: ic.APIVIP(), Port: 6443}}}
		img := ic.Metalshift.OSImage
		image := infrav1.Image{URL: img.URL, Checksum: img.Checksum, ChecksumType: img.ChecksumType}
		template := func(role, excluded string) *infrav1.MetalMachineTemplate {
			t := &infrav1.MetalMachineTemplate{TypeMeta: tm(infraGV, "MetalMachineTemplate"), ObjectMeta: meta(name + "-" + role)}
			t.Spec.Template.Spec = infrav1.MetalMachineSpec{Image: image, HostSelector: metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: RoleLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{excluded}}},
			}}
			return t
		}
		masters, workers := template("master", installconfig.RoleWorker), template("worker", installconfig.RoleMaster)
		objs = append(objs, mc, masters, workers)
		infraName, mastersName, workersName = mc.Name, masters.Name, workers.Name
	}
	cp := &controlplanev1.OpenShiftControlPlane{TypeMeta: tm(cpGV, "OpenShiftControlPlane"), ObjectMeta: meta(name),
		Spec: controlplanev1.OpenShiftControlPlaneSpec{
			Replicas: ptr.To(ic.ControlPlaneReplicas()), Version: kube, DistributionVersion: version,
			MachineTemplate: controlplanev1.MachineTemplate{Spec: controlplanev1.MachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: templateKind, Name: mastersName},
			}},
			InstallConfigRef:  controlplanev1.SecretReference{Name: icSecret.Name},
			InstallStateRef:   controlplanev1.SecretReference{Name: state.Name},
			ManifestsSelector: metav1.LabelSelector{MatchLabels: map[string]string{ManifestsLabel: name}},
		}}
	cluster := &clusterv1.Cluster{TypeMeta: tm(clusterv1.GroupVersion.String(), "Cluster"), ObjectMeta: meta(name),
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infraKind, Name: infraName},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "OpenShiftControlPlane", Name: cp.Name},
		}}
	objs = append(objs, cp, cluster)
	if ic.WorkerReplicas() > 0 || len(ic.Compute) > 0 {
		wcfg := &bootstrapv1.OpenShiftConfigTemplate{TypeMeta: tm(bsGV, "OpenShiftConfigTemplate"), ObjectMeta: meta(name + "-worker")}
		wcfg.Spec.Template.Spec.Role = bootstrapv1.RoleWorker
		wcfg.Spec.Template.Spec.MachineConfigServerHost = ic.APIInternalHost()
		md := &clusterv1.MachineDeployment{TypeMeta: tm(clusterv1.GroupVersion.String(), "MachineDeployment"), ObjectMeta: meta(name + "-worker"),
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: name, Replicas: ptr.To(ic.WorkerReplicas()),
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.ClusterNameLabel: name, "install.metalshift.io/pool": "worker"}},
				Template: clusterv1.MachineTemplateSpec{
					ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{clusterv1.ClusterNameLabel: name, "install.metalshift.io/pool": "worker"}},
					Spec: clusterv1.MachineSpec{
						ClusterName: name, Version: kube,
						Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
							APIGroup: bootstrapv1.GroupVersion.Group, Kind: "OpenShiftConfigTemplate", Name: wcfg.Name}},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: templateKind, Name: workersName},
					},
				},
			}}
		objs = append(objs, wcfg, md)
	}
	return objs, nil
}

// bootMAC spells a validated MAC address as a BareMetalHost wants it
// (colon-separated, whatever form the install-config used).
func bootMAC(mac string) string {
	if hw, err := net.ParseMAC(mac); err == nil {
		return hw.String()
	}
	return mac
}

// writeDefaultManifests writes the manifests every cluster gets unless the
// directories exist already (then the user's edits are kept).
func writeDefaultManifests(dir string, ic *installconfig.InstallConfig, raw []byte) error {
	// The installed cluster's copy holds neither the pull secret nor BMC credentials.
	sanitized, err := installconfig.Sanitize(raw)
	if err != nil {
		return err
	}
	defaults := map[string]map[string]any{
		ManifestsDir: {"cluster-config.yaml": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cluster-config-v1", "namespace": "kube-system"},
			"data":     map[string]any{"install-config": string(sanitized)},
		}},
		OpenShiftDir: {"99_metalshift-installer.yaml": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "metalshift-installer", "namespace": "kube-system"},
			"data":     map[string]any{"installedBy": "metalshift", "cluster": ic.Metadata.Name},
		}},
	}
	for sub, files := range defaults {
		d := filepath.Join(dir, sub)
		if _, err := os.Stat(d); err == nil {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		for f, obj := range files {
			data, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, f), data, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// WrapManifests wraps every file of <dir>/manifests and <dir>/openshift in a
// Secret annotated with the directory it came from.
func WrapManifests(dir, cluster string) ([]*corev1.Secret, error) {
	var out []*corev1.Secret
	for _, sub := range []struct{ dir, typ string }{{ManifestsDir, controlplanev1.ManifestTypeManifest}, {OpenShiftDir, controlplanev1.ManifestTypeOpenShift}} {
		entries, err := os.ReadDir(filepath.Join(dir, sub.dir))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, sub.dir, e.Name()))
			if err != nil {
				return nil, err
			}
			out = append(out, &corev1.Secret{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{
					Name: secretName(cluster, sub.typ, e.Name()), Namespace: cluster,
					Labels:      map[string]string{ManifestsLabel: cluster, clusterv1.ClusterNameLabel: cluster},
					Annotations: map[string]string{controlplanev1.ManifestAnnotation: sub.typ},
				},
				Data: map[string][]byte{e.Name(): data},
			})
		}
	}
	return out, nil
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

func secretName(cluster, typ, file string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(file), "-"), "-")
	name := cluster + "-" + typ + "-" + n
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}
