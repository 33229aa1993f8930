package providers

import (
	"fmt"
	"slices"
	"strings"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/manager"
)

// Provider is the hub manager packaged as one clusterctl provider: a
// Deployment of cmd/manager that runs some of its components.
type Provider struct {
	// Name is clusterctl's name of the provider, e.g. "metal" in
	// `clusterctl init --infrastructure metal`.
	Name string
	// Type is clusterctl's provider type.
	Type clusterctlv1.ProviderType
	// Components are the manager's components the Deployment runs
	// (--components).
	Components []string
	// Servers are the HTTP servers of the components that machines reach,
	// each behind a Service of its own.
	Servers []Server
	// Args are the provider's own flags, beyond those every provider's
	// Deployment has; values may be clusterctl variables.
	Args []string
}

// Server is an HTTP server of a component, which machines reach through a
// Service.
type Server struct {
	// Name names the Service (metalshift-<Name>) and the container port.
	Name string
	// ListenFlag is the manager flag of the server's listen address.
	ListenFlag string
	// Port is the container port; ServicePort the Service's.
	Port, ServicePort int32
	// TLS serves https with a certificate cert-manager issues for the
	// host name in $METALSHIFT_<NAME>_HOST, mounted at TLSDir.
	TLS bool
	// BootImages tells that the server hands out the images machines
	// boot: the Deployment names the live images in the manager's image
	// with --live-image-dir (manager.ImageLiveDir).
	BootImages bool
}

// Where the Deployment mounts its Secrets, and the ports every manager
// container has.
const (
	WebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"
	SigningKeyDir  = "/etc/metalshift/signing-key"
	// SigningKeySecret is the Secret, in each provider's namespace, whose
	// key "key" holds the signing key (at least 32 random bytes).
	SigningKeySecret = "metalshift-signing-key"
	// TLSDir is where a TLS server's certificate Secret is mounted.
	TLSDir = "/etc/metalshift/tls"

	WebhookPort = 9443
	HealthPort  = 9440
	MetricsPort = 8080
)

// Names of the objects in each provider's namespace.
const (
	DeploymentName     = "metalshift-controller-manager"
	ServiceAccountName = "metalshift-manager"
	WebhookService     = "metalshift-webhook-service"
	webhookCertName    = "metalshift-serving-cert"
	webhookCertSecret  = "metalshift-webhook-service-cert" //nolint:gosec // the name of a Secret, no credential
	issuerName         = "metalshift-selfsigned-issuer"
	leaderElectionRole = "metalshift-leader-election"
)

// All are metalshift's providers. The core provider is the upstream
// Cluster API core, run by the manager; a hub installs all of them, or all
// but the agent service.
func All() []Provider {
	return []Provider{
		{Name: "cluster-api", Type: clusterctlv1.CoreProviderType, Components: []string{component.CAPICore.Name}},
		{
			// The Provisioning CRD is metal3.io's, installed with the host
			// engine's; the operator's component validates it (its
			// controller only runs with --baremetal-operator).
			Name: "metal", Type: clusterctlv1.InfrastructureProviderType,
			Components: []string{"host-engine", "infrastructure-metal", "baremetal-operator"},
			Servers:    []Server{{Name: "deploy", ListenFlag: "deploy-listen-address", Port: 6180, ServicePort: 80, BootImages: true}},
			// Plain http until the deploy server's certificate is packaged.
			Args: []string{"--deploy-url=${METALSHIFT_DEPLOY_URL}", "--deploy-insecure-http"},
		},
		{
			Name: "openshift", Type: clusterctlv1.BootstrapProviderType, Components: []string{"bootstrap-openshift"},
			Servers: []Server{{Name: "ignition", ListenFlag: "ignition-listen-address", Port: 6443, ServicePort: 443, TLS: true}},
			Args: []string{
				"--ignition-url=https://${METALSHIFT_IGNITION_HOST}:${METALSHIFT_IGNITION_PORT:=443}",
				"--ignition-cert-file=" + TLSDir + "/tls.crt", "--ignition-key-file=" + TLSDir + "/tls.key", "--ignition-ca-file=" + TLSDir + "/ca.crt",
			},
		},
		{Name: "openshift", Type: clusterctlv1.ControlPlaneProviderType, Components: []string{"controlplane-openshift"}},
		{
			Name: "agent", Type: clusterctlv1.AddonProviderType, Components: []string{"agent-install"},
			Servers: []Server{{Name: "agent-service", ListenFlag: "agent-service-listen-address", Port: 6190, ServicePort: 80, BootImages: true}},
			// Plain http until the service's certificate is packaged.
			Args: []string{"--agent-service-url=${METALSHIFT_AGENT_SERVICE_URL}", "--agent-service-deploy-url=${METALSHIFT_DEPLOY_URL}", "--agent-service-insecure-http"},
		},
	}
}

// Label is clusterctl's label of the provider (cluster-api,
// infrastructure-metal, ...): the directory of its local repository and
// the value of the cluster.x-k8s.io/provider label on its objects.
func (p Provider) Label() string { return clusterctlv1.ManifestLabel(p.Name, p.Type) }

// Namespace is the provider's default target namespace.
func (p Provider) Namespace() string { return "metalshift-" + p.Label() + "-system" }

// ComponentsFile is the name of the provider's components YAML.
func (p Provider) ComponentsFile() string {
	prefix := map[clusterctlv1.ProviderType]string{
		clusterctlv1.CoreProviderType:           "core",
		clusterctlv1.InfrastructureProviderType: "infrastructure",
		clusterctlv1.BootstrapProviderType:      "bootstrap",
		clusterctlv1.ControlPlaneProviderType:   "control-plane",
		clusterctlv1.AddonProviderType:          "addon",
	}[p.Type]
	return prefix + "-components.yaml"
}

// ConfigType is the provider type as a clusterctl config file spells it.
func (p Provider) ConfigType() string { return string(p.Type) }

// components returns the manager's components the provider runs.
func (p Provider) components() ([]component.Component, error) {
	if len(p.Components) == 0 {
		return nil, fmt.Errorf("provider %s runs no component", p.Label())
	}
	picked, err := component.Select(manager.Components(), p.Components)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Label(), err)
	}
	return picked, nil
}

// SigningKey tells whether the provider's servers need the signing key.
func (p Provider) SigningKey() bool { return len(p.Servers) > 0 }

// BootImages tells whether a server of the provider hands out boot images.
func (p Provider) BootImages() bool {
	return slices.ContainsFunc(p.Servers, func(s Server) bool { return s.BootImages })
}

// hostVariable is the clusterctl variable of a TLS server's host name.
func (s Server) hostVariable() string {
	return "METALSHIFT_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_")) + "_HOST"
}

// tlsSecret is the Secret of a TLS server's certificate.
func (s Server) tlsSecret() string { return "metalshift-" + s.Name + "-cert" }
