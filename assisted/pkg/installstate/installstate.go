// Package installstate makes what an agent-based install needs once it
// starts and keeps in its install-state Secret: the install-config the
// AgentClusterInstall and ClusterDeployment describe, the cluster's root CA,
// the admin kubeconfig and the kubeadmin password; and renders each host's
// Ignition from them.
package installstate

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/internal/ignition"
)

// Inputs are what the install state is made of.
type Inputs struct {
	CD  *hivev1.ClusterDeployment
	ACI *hiveextv1.AgentClusterInstall
	// Version is the OpenShift release, e.g. 4.16.3.
	Version string
	// SNOAddress is the single node's IP address: with no VIPs, the API
	// answers there. Empty for multi-node clusters.
	SNOAddress string
	// Manifests are the user's manifests (folder openshift) by file name.
	Manifests map[string][]byte
}

// State is the content of the install-state Secret.
type State struct {
	InstallConfig     []byte // sanitized: no pull secret
	RootCA            certs.KeyPair
	AdminKubeconfig   []byte
	KubeadminPassword string
	// APIAddress is where the installed cluster's API answers (VIP, or the
	// single node's address).
	APIAddress string
	// Manifests are the user's manifests (folder openshift) by file name,
	// which the bootstrap node applies.
	Manifests map[string][]byte
}

// InstallConfig is the install-config of an install, with the
// AgentClusterInstall's install-config overrides applied (an
// *OverridesError when they do not apply).
func InstallConfig(in Inputs) (*installconfig.InstallConfig, error) {
	aci, cd := in.ACI, in.CD
	req := aci.Spec.ProvisionRequirements
	//nolint:gosec // provisionRequirements are small counts (validated by the CRD)
	ic := &installconfig.InstallConfig{
		APIVersion: "v1", BaseDomain: cd.Spec.BaseDomain, Metadata: installconfig.Metadata{Name: cd.Spec.ClusterName},
		ControlPlane: installconfig.MachinePool{Name: installconfig.RoleMaster, Replicas: ptr.To(int32(req.ControlPlaneAgents))},
		Compute:      []installconfig.MachinePool{{Name: installconfig.RoleWorker, Replicas: ptr.To(int32(req.WorkerAgents))}},
		SSHKey:       aci.Spec.SSHPublicKey,
		Metalshift:   &installconfig.Metalshift{Version: in.Version},
	}
	n := aci.Spec.Networking
	ic.Networking = &installconfig.Networking{ServiceNetwork: n.ServiceNetwork, NetworkType: n.NetworkType}
	for _, m := range n.MachineNetwork {
		ic.Networking.MachineNetwork = append(ic.Networking.MachineNetwork, installconfig.CIDR{CIDR: m.CIDR})
	}
	for _, c := range n.ClusterNetwork {
		ic.Networking.ClusterNetwork = append(ic.Networking.ClusterNetwork, installconfig.CIDRs{CIDR: c.CIDR, HostPrefix: c.HostPrefix})
	}
	api, ingress := APIVIPs(aci), IngressVIPs(aci)
	if len(api) > 0 {
		ic.Platform.BareMetal = &installconfig.BareMetal{APIVIPs: api, IngressVIPs: ingress, Hosts: []installconfig.Host{}}
	} else {
		ic.Platform.None = &struct{}{}
	}
	if err := ApplyOverrides(ic, aci.Annotations[InstallConfigOverridesAnnotation]); err != nil {
		return nil, err
	}
	return ic, nil
}

// APIVIPs are the ACI's API VIPs (apiVIPs, else the deprecated apiVIP).
func APIVIPs(aci *hiveextv1.AgentClusterInstall) []string {
	if len(aci.Spec.APIVIPs) > 0 {
		return aci.Spec.APIVIPs
	}
	if aci.Spec.APIVIP != "" {
		return []string{aci.Spec.APIVIP}
	}
	return nil
}

// IngressVIPs are the ACI's ingress VIPs.
func IngressVIPs(aci *hiveextv1.AgentClusterInstall) []string {
	if len(aci.Spec.IngressVIPs) > 0 {
		return aci.Spec.IngressVIPs
	}
	if aci.Spec.IngressVIP != "" {
		return []string{aci.Spec.IngressVIP}
	}
	return nil
}

// New makes an install's state.
func New(in Inputs) (*State, error) {
	ic, err := InstallConfig(in)
	if err != nil {
		return nil, err
	}
	addr := in.SNOAddress
	if vips := APIVIPs(in.ACI); len(vips) > 0 {
		addr = vips[0]
	}
	if net.ParseIP(addr) == nil {
		return nil, errors.New("the cluster has neither an API VIP nor a single node address for its API")
	}
	raw, err := yaml.Marshal(ic)
	if err != nil {
		return nil, err
	}
	ca, err := certs.NewCA("root-ca")
	if err != nil {
		return nil, err
	}
	admin, err := certs.Issue(ca, certs.Spec{CommonName: "system:admin", Organizations: []string{"system:masters"}})
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	name := in.CD.Spec.ClusterName
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(addr, "6443"), CertificateAuthorityData: ca.Cert}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.Cert, ClientKeyData: admin.Key}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: name, AuthInfo: "admin"}
	cfg.CurrentContext = "admin"
	kc, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, err
	}
	pw, err := password()
	if err != nil {
		return nil, err
	}
	return &State{InstallConfig: raw, RootCA: ca, AdminKubeconfig: kc, KubeadminPassword: pw, APIAddress: addr, Manifests: in.Manifests}, nil
}

// password is a kubeadmin password in openshift-install's shape: four
// groups of five letters and digits.
func password() (string, error) {
	const chars = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 0, 23)
	for i := range 20 {
		if i > 0 && i%5 == 0 {
			b = append(b, '-')
		}
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
		if err != nil {
			return "", err
		}
		b = append(b, chars[n.Int64()])
	}
	return string(b), nil
}

// HostIgnition renders a host's Ignition. role is master or worker;
// bootstrap renders the bootstrap node's config instead (inPlace: the
// single node's bootstrap-in-place config).
func HostIgnition(st *State, clusterDomain, role string, bootstrap, inPlace bool, pullSecret []byte, version string, override []byte) ([]byte, error) {
	if bootstrap {
		return ignition.Bootstrap(ignition.BootstrapOptions{
			InstallConfig: st.InstallConfig, PullSecret: pullSecret, RootCACert: st.RootCA.Cert, RootCAKey: st.RootCA.Key,
			AdminKubeconfig: st.AdminKubeconfig, ReleaseVersion: version, Override: override, InPlace: inPlace,
			Manifests: append([]ignition.Manifest{ControllerManifest}, bootstrapManifests(st.Manifests)...),
		})
	}
	mcs := fmt.Sprintf("https://api-int.%s:%d", clusterDomain, bootstrapnode.MachineConfigServerPort)
	return ignition.Pointer(ignition.PointerOptions{MachineConfigServer: mcs, Role: role, RootCA: st.RootCA.Cert, Override: override})
}

// Secret data keys.
const (
	keyRootCACert      = "root-ca.crt"
	keyRootCAKey       = "root-ca.key"
	keyAdminKubeconfig = "kubeconfig"
	keyInstallConfig   = "install-config.yaml"
	keyPassword        = "password"
	keyAPIAddress      = "api-address"
)

// Data is the state as Secret data.
func (st *State) Data() map[string][]byte {
	data := map[string][]byte{
		keyRootCACert: st.RootCA.Cert, keyRootCAKey: st.RootCA.Key, keyAdminKubeconfig: st.AdminKubeconfig,
		keyInstallConfig: st.InstallConfig, keyPassword: []byte(st.KubeadminPassword), keyAPIAddress: []byte(st.APIAddress),
	}
	manifestsData(data, st.Manifests)
	return data
}

// FromData reads a state from Secret data.
func FromData(data map[string][]byte) (*State, error) {
	for _, k := range []string{keyRootCACert, keyRootCAKey, keyAdminKubeconfig, keyInstallConfig, keyPassword} {
		if len(data[k]) == 0 {
			return nil, fmt.Errorf("the install state has no %s", k)
		}
	}
	return &State{InstallConfig: data[keyInstallConfig], RootCA: certs.KeyPair{Cert: data[keyRootCACert], Key: data[keyRootCAKey]},
		AdminKubeconfig: data[keyAdminKubeconfig], KubeadminPassword: string(data[keyPassword]), APIAddress: string(data[keyAPIAddress]),
		Manifests: manifestsFromData(data)}, nil
}

// ControllerManifest deploys the in-cluster side of an agent-based install,
// as upstream's assisted-installer-controller: its namespace and
// configuration. While the install runs the controller approves the
// joining nodes' CSRs; once the cluster is installed it is done, and CSRs
// of hosts added later are the agent service's to approve (day 2).
var ControllerManifest = ignition.Manifest{Dir: "openshift", Name: "99_assisted-installer-controller.yaml", Data: []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: ` + ControllerNamespace + `
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: assisted-installer-controller-config
  namespace: ` + ControllerNamespace + `
data:
  approve-csrs: "until-installed"
`)}

// ControllerNamespace is the installed cluster's namespace of the
// assisted-installer controller.
const ControllerNamespace = "assisted-installer"
