package metal3

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Names of what the operator deploys, as upstream names them.
const (
	// Namespace holds the operand and the hosts it manages by default.
	Namespace = "openshift-machine-api"
	// DeploymentName is the operand's Deployment.
	DeploymentName = "metal3"
	// OwnedAnnotation marks a metal3 Deployment as the bare-metal
	// operator's. A metal3 Deployment without it is claimed when the
	// machine-api operator left it (see LeftByMachineAPI); any other
	// belongs to another owner, which hands it over by adding it.
	OwnedAnnotation = "baremetal.openshift.io/owned"
	// MachineAPIOwnedAnnotation marks a Deployment the machine-api
	// operator created; it ran metal3 before the bare-metal operator
	// existed and leaves its metal3 Deployment behind on an upgraded
	// cluster.
	MachineAPIOwnedAnnotation = "machine.openshift.io/owned"
	// ServiceAccountName runs the operand.
	ServiceAccountName = "cluster-baremetal-operator"
	// ContainerName is the operand's container.
	ContainerName = "metal3-host-engine"
)

// metalshift's own names.
const (
	// SigningKeySecret holds the operand's signing key (key "key"), created
	// once by the operator and never rotated: the deploy URLs hosts hold
	// stay valid across restarts.
	SigningKeySecret = "metalshift-signing-key"
	// SigningKeyKey is the key of SigningKeySecret's data.
	SigningKeyKey = "key"
	// DeployCASecret holds the CA the deploy server's certificate is
	// signed with (tls.crt, tls.key), created once by the operator and
	// never rotated: hosts hold it in their boot configuration. The
	// operand never mounts it.
	DeployCASecret = "metalshift-deploy-ca" //nolint:gosec // the name of a Secret, no credential
	// DeployTLSSecret holds the deploy server's certificate (tls.crt,
	// tls.key) and the CA hosts are handed (ca.crt), which the operator
	// issues again when the addresses hosts reach it at change or it
	// nears its end (TLS). The operand reads its files again when the
	// kubelet updates them.
	DeployTLSSecret = "metalshift-deploy-tls" //nolint:gosec // the name of a Secret, no credential
	// VersionAnnotation on the pod template is the operator version that
	// rendered it: a new version rolls the operand.
	VersionAnnotation = "metalshift.io/operator-version"
	// SpecHashAnnotation on the Deployment is the hash of the spec the
	// operator last applied; the operator writes only when it changes.
	SpecHashAnnotation = "metalshift.io/spec-hash"

	// DeployPort is the deploy (and image) server's port, https: upstream's
	// "vmedia-https" port, where its httpd serves virtual media over TLS.
	DeployPort = 6183
	// BootPort is the deploy server's plain http port for network-booting
	// firmware (iPXE), on a provisioning network only: upstream's httpd
	// "http" port, where iPXE loads its files.
	BootPort = 6180
	// HealthPort serves the manager's /healthz and /readyz.
	HealthPort = 9440

	signingKeyDir = "/etc/metalshift/signing-key"
	tlsDir        = "/etc/metalshift/tls"
)

// Labels of the operand's pods, also its selector (upstream's).
var Labels = map[string]string{
	"k8s-app": "metal3",
	"baremetal.openshift.io/cluster-baremetal-operator": "metal3-state",
}

// Options are what the operator itself brings to the operand.
type Options struct {
	// Image is the image of metalshift's manager.
	Image string
	// Version is the operator's version.
	Version string
}

// Deployment returns the metal3 Deployment for prov: one replica of the
// manager on a control-plane node's network, running the host engine.
func Deployment(prov *metal3v1.Provisioning, o Options) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: DeploymentName, Namespace: Namespace, Labels: maps.Clone(Labels),
			Annotations: map[string]string{OwnedAnnotation: ""},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(Labels)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(Labels), Annotations: map[string]string{VersionAnnotation: o.Version}},
				Spec:       podSpec(&prov.Spec, o),
			},
		},
	}
	d.Annotations[SpecHashAnnotation] = specHash(&d.Spec)
	return d
}

func podSpec(spec *metal3v1.ProvisioningSpec, o Options) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName: ServiceAccountName,
		HostNetwork:        true,
		DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
		NodeSelector:       map[string]string{"node-role.kubernetes.io/master": ""},
		Tolerations: []corev1.Toleration{
			{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule, Operator: corev1.TolerationOpExists},
			{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule, Operator: corev1.TolerationOpExists},
		},
		Containers: []corev1.Container{{
			Name:    ContainerName,
			Image:   o.Image,
			Command: []string{"/manager"},
			Args:    Args(spec),
			Env:     Env(spec, o),
			Ports:   ports(spec),
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromInt32(HealthPort)}}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "signing-key", MountPath: signingKeyDir, ReadOnly: true},
				{Name: "deploy-tls", MountPath: tlsDir, ReadOnly: true},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "signing-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SigningKeySecret}}},
			{Name: "deploy-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: DeployTLSSecret}}},
		},
	}
}

func ports(spec *metal3v1.ProvisioningSpec) []corev1.ContainerPort {
	p := []corev1.ContainerPort{{Name: "https", ContainerPort: DeployPort, Protocol: corev1.ProtocolTCP}}
	if networkBoot(spec) {
		p = append(p, corev1.ContainerPort{Name: "http", ContainerPort: BootPort, Protocol: corev1.ProtocolTCP})
	}
	return append(p, corev1.ContainerPort{Name: "healthz", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP})
}

// Args are the manager's arguments for spec: the host engine's deploy
// server on every address of the node, over https with the certificate of
// DeployTLSSecret, announced to hosts at the provisioning address, or at
// the node's address when hosts boot from virtual media over the external
// network; on a provisioning network, its plain http listener for
// network-booting firmware; hosts in openshift-machine-api only unless
// watchAllNamespaces; no webhooks, no metrics.
func Args(spec *metal3v1.ProvisioningSpec) []string {
	args := []string{
		"--components=host-engine",
		fmt.Sprintf("--deploy-listen-address=:%d", DeployPort),
		"--deploy-url=" + DeployURL(spec),
		"--deploy-cert-file=" + tlsDir + "/" + corev1.TLSCertKey,
		"--deploy-key-file=" + tlsDir + "/" + corev1.TLSPrivateKeyKey,
		"--deploy-ca-file=" + tlsDir + "/" + CAKey,
	}
	if networkBoot(spec) {
		args = append(args, fmt.Sprintf("--deploy-boot-listen-address=:%d", BootPort), "--deploy-boot-url="+BootURL(spec))
	}
	args = append(args,
		"--signing-key-file="+signingKeyDir+"/"+SigningKeyKey,
		"--leader-elect", "--leader-election-namespace="+Namespace,
		"--webhook-port=0", "--metrics-bind-address=0",
		fmt.Sprintf("--health-addr=:%d", HealthPort),
	)
	if !spec.WatchAllNamespaces {
		args = append(args, "--namespace="+Namespace)
	}
	return args
}

// DeployURL is how hosts reach the deploy server: at provisioningIP on a
// provisioning network, else (Disabled mode, no provisioningIP, or virtual
// media over the external network) at the node's address, which the
// kubelet expands from $(HOST_IP).
func DeployURL(spec *metal3v1.ProvisioningSpec) string {
	host := "$(HOST_IP)"
	if spec.NetworkMode() != metal3v1.ProvisioningNetworkDisabled && spec.ProvisioningIP != "" && !spec.VirtualMediaViaExternalNetwork {
		host = spec.ProvisioningIP
	}
	return "https://" + net.JoinHostPort(host, strconv.Itoa(DeployPort))
}

// networkBoot tells whether hosts may boot from the network: on a
// provisioning network (upstream's Disabled mode boots from virtual media
// only).
func networkBoot(spec *metal3v1.ProvisioningSpec) bool {
	return spec.NetworkMode() != metal3v1.ProvisioningNetworkDisabled
}

// BootURL is how network-booting firmware on the provisioning network
// reaches the deploy server's plain http listener: at provisioningIP, else
// at the node's address.
func BootURL(spec *metal3v1.ProvisioningSpec) string {
	host := "$(HOST_IP)"
	if spec.ProvisioningIP != "" {
		host = spec.ProvisioningIP
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(BootPort))
}

// Env is the operand's environment: the node's address, the operator's
// version, and the provisioning network's settings under upstream's names,
// for a DHCP server or static-address sidecar (metalshift's manager runs
// neither: it reads none of them).
func Env(spec *metal3v1.ProvisioningSpec, o Options) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
		{Name: "RELEASE_VERSION", Value: o.Version},
		{Name: "PROVISIONING_NETWORK", Value: string(spec.NetworkMode())},
	}
	add := func(name, value string) {
		if value != "" {
			env = append(env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	add("PROVISIONING_INTERFACE", spec.ProvisioningInterface)
	add("PROVISIONING_IP", spec.ProvisioningIP)
	add("PROVISIONING_CIDR", spec.ProvisioningNetworkCIDR)
	add("PROVISIONING_MACS", strings.Join(spec.ProvisioningMacAddresses, ","))
	if spec.NetworkMode() == metal3v1.ProvisioningNetworkManaged {
		add("DHCP_RANGE", strings.ReplaceAll(spec.ProvisioningDHCPRange, ", ", ","))
		add("GATEWAY_IP", spec.ProvisioningNetworkGateway)
	}
	add("ADDITIONAL_NTP_SERVERS", strings.Join(spec.AdditionalNTPServers, ","))
	add("OS_DOWNLOAD_URL", spec.ProvisioningOSDownloadURL)
	return env
}

// RolledOut tells whether d's controller has rolled out its current
// generation: every replica updated and available, none of an older one.
func RolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want {
		return false
	}
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func specHash(spec *appsv1.DeploymentSpec) string {
	b, _ := json.Marshal(spec) // a Go struct of plain fields always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// LeftByMachineAPI says whether d, a metal3 Deployment without
// OwnedAnnotation, is the one the machine-api operator left: it carries
// the machine-api operator's ownership annotation. The bare-metal operator
// claims such a Deployment; it leaves any other alone.
func LeftByMachineAPI(d *appsv1.Deployment) bool {
	_, mao := d.Annotations[MachineAPIOwnedAnnotation]
	return mao
}
