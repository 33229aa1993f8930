package providers

import (
	"fmt"
	"slices"
	"strconv"
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
	// ConsolePort, when set, is the container port of the web console,
	// which people (not machines) reach through the Service
	// metalshift-console: https with a certificate from the provider's
	// self-signed Issuer for $METALSHIFT_CONSOLE_HOST.
	ConsolePort int32
	// Unprivileged tells that the provider's components read and write
	// nothing with its own credentials (the console acts as each
	// signed-in user): its ServiceAccount is bound to no ClusterRole,
	// only to the leader-election Role of its namespace.
	Unprivileged bool
}

// Server is an HTTP server of a component, which machines reach through a
// Service. Every server speaks https with a certificate cert-manager issues
// from the machine CA (MachineCASecret) for the host name in
// $METALSHIFT_<NAME>_HOST, and hands machines that CA.
type Server struct {
	// Name names the Service (metalshift-<Name>), the container port and
	// the manager's flags of the server: --<Name>-listen-address,
	// --<Name>-url and --<Name>-cert-file, -key-file, -ca-file.
	Name string
	// Port is the container port; the Service's is 443.
	Port int32
	// BootImages tells that the server hands out the images machines
	// boot: the Deployment names the live images in the manager's image
	// with --live-image-dir (manager.ImageLiveDir).
	BootImages bool
	// BootPort, when set, is the container port of the server's plain
	// http listener for network-booting firmware that cannot verify a
	// certificate (--<Name>-boot-listen-address, --<Name>-boot-url): behind
	// a Service of its own, metalshift-<Name>-boot, which machines reach
	// only when $METALSHIFT_<NAME>_BOOT_SERVICE_TYPE says so.
	BootPort int32
}

// Where the Deployment mounts its Secrets, and the ports every manager
// container has.
const (
	WebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"
	SigningKeyDir  = "/etc/metalshift/signing-key"
	// SigningKeySecret is the Secret, in each provider's namespace, whose
	// key "key" holds the signing key (at least 32 random bytes).
	SigningKeySecret = "metalshift-signing-key"
	// MachineCASecret is the Secret, in the namespace of each provider with
	// servers, holding the CA machines trust for every server (tls.crt,
	// tls.key): the CA of its machine CA Issuer, which signs the servers'
	// certificates. The same CA in every namespace: the agent service
	// hands machines the deploy server's CA as its own.
	MachineCASecret = "metalshift-machine-ca"
	// TLSDir is where the Secrets of the servers' certificates are
	// mounted, each in the directory of its server's name.
	TLSDir = "/etc/metalshift/tls"

	WebhookPort = 9443
	HealthPort  = 9440
	MetricsPort = 8080
	// ServerServicePort is the port of every server's Service (https);
	// BootServicePort that of a boot Service (plain http).
	ServerServicePort = 443
	BootServicePort   = 80
)

// Names of the objects in each provider's namespace.
const (
	DeploymentName     = "metalshift-controller-manager"
	ServiceAccountName = "metalshift-manager"
	WebhookService     = "metalshift-webhook-service"
	webhookCertName    = "metalshift-serving-cert"
	webhookCertSecret  = "metalshift-webhook-service-cert" //nolint:gosec // the name of a Secret, no credential
	issuerName         = "metalshift-selfsigned-issuer"
	// machineCAIssuer issues the servers' certificates from MachineCASecret.
	machineCAIssuer    = "metalshift-machine-ca-issuer"
	leaderElectionRole = "metalshift-leader-election"
)

// metalNamespace is the metal provider's namespace.
var metalNamespace = Provider{Name: "metal", Type: clusterctlv1.InfrastructureProviderType}.Namespace()

// All are metalshift's providers. The core provider is the upstream
// Cluster API core, run by the manager; a hub installs all of them, or all
// but the agent service.
func All() []Provider {
	deploy := Server{Name: "deploy", Port: 6180, BootImages: true, BootPort: 6181}
	agentService := Server{Name: "agent-service"}
	return []Provider{
		{Name: "cluster-api", Type: clusterctlv1.CoreProviderType, Components: []string{component.CAPICore.Name}},
		{
			// The Provisioning CRD is metal3.io's, installed with the host
			// engine's; the operator's component validates it (its
			// controller only runs with --baremetal-operator).
			Name: "metal", Type: clusterctlv1.InfrastructureProviderType,
			Components: []string{"host-engine", "infrastructure-metal", "baremetal-operator", "infrastructure-equinix"},
			Servers:    []Server{deploy},
			// Equinix Metal devices boot from the deploy server's boot listener.
			Args: []string{"--equinix-boot-url=" + deploy.BootURL(metalNamespace)},
		},
		{
			Name: "openshift", Type: clusterctlv1.BootstrapProviderType, Components: []string{"bootstrap-openshift"},
			Servers: []Server{{Name: "ignition", Port: 6443}},
		},
		{Name: "openshift", Type: clusterctlv1.ControlPlaneProviderType, Components: []string{"controlplane-openshift"}},
		{
			Name: "agent", Type: clusterctlv1.AddonProviderType, Components: []string{"agent-install"},
			Servers: []Server{{Name: "agent-service", Port: 6190, BootImages: true}},
			// Converged-flow images carry the deploy server's URL and CA:
			// the machine CA, which signed both servers' certificates, is
			// the CA of the agent service's own certificate Secret.
			Args: []string{"--agent-service-deploy-url=" + deploy.URL(), "--agent-service-deploy-ca-file=" + agentService.TLSFile("ca.crt")},
		},
		// The web console acts as each signed-in user: its pods need no
		// rights of their own.
		{Name: "console", Type: clusterctlv1.AddonProviderType, Components: []string{"console"}, ConsolePort: 6200, Unprivileged: true},
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

// Console names the web console's Service, certificate Secret and
// container port; ConsoleHostVariable is the clusterctl variable of the
// host name people reach it at (by default the Service's name in the
// cluster, for kubectl port-forward).
const (
	Console             = "console"
	ConsoleService      = "metalshift-console"
	ConsoleCertSecret   = "metalshift-console-cert"
	ConsoleHostVariable = "METALSHIFT_CONSOLE_HOST"
	// ConsoleServiceType is the type of the console's Service: ClusterIP
	// unless the site exposes it.
	ConsoleServiceType = "${METALSHIFT_CONSOLE_SERVICE_TYPE:=ClusterIP}"
)

// consoleTLSDir is where the console's certificate Secret is mounted.
const consoleTLSDir = TLSDir + "/" + Console

// MachineCA tells whether the provider's servers need the machine CA.
func (p Provider) MachineCA() bool { return len(p.Servers) > 0 }

// variable is the clusterctl variable METALSHIFT_<NAME>_<suffix>.
func (s Server) variable(suffix string) string {
	return "METALSHIFT_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_")) + "_" + suffix
}

// HostVariable is the clusterctl variable of the host name machines reach
// the server at, which its certificate holds.
func (s Server) HostVariable() string { return s.variable("HOST") }

// URL is how machines reach the server: https at $METALSHIFT_<NAME>_HOST
// and $METALSHIFT_<NAME>_PORT (default 443).
func (s Server) URL() string {
	return "https://${" + s.HostVariable() + "}:${" + s.variable("PORT") + ":=" + strconv.Itoa(ServerServicePort) + "}"
}

// BootURL is how network-booting firmware reaches the server's plain http
// listener: $METALSHIFT_<NAME>_BOOT_URL, by default the boot Service's
// name in the cluster (which machines do not resolve: a site that boots
// from the network sets it).
func (s Server) BootURL(ns string) string {
	return "${" + s.variable("BOOT_URL") + ":=http://" + s.bootService() + "." + ns + ".svc}"
}

// bootServiceType is the type of the boot Service: ClusterIP unless
// $METALSHIFT_<NAME>_BOOT_SERVICE_TYPE says otherwise.
func (s Server) bootServiceType() string {
	return "${" + s.variable("BOOT_SERVICE_TYPE") + ":=ClusterIP}"
}

// Service is the name of the server's Service.
func (s Server) Service() string { return "metalshift-" + s.Name }

func (s Server) bootService() string { return s.Service() + "-boot" }

// bootPortName names the boot listener's container port.
func (s Server) bootPortName() string { return s.Name + "-boot" }

// CertSecret is the Secret of the server's certificate, which cert-manager
// issues from the machine CA.
func (s Server) CertSecret() string { return "metalshift-" + s.Name + "-cert" }

// TLSFile is the path of a file of the server's certificate Secret
// (tls.crt, tls.key, ca.crt) in the Deployment.
func (s Server) TLSFile(key string) string { return s.tlsDir() + "/" + key }

// tlsDir is where the server's certificate Secret is mounted.
func (s Server) tlsDir() string { return TLSDir + "/" + s.Name }

// args are the manager's flags of the server: where it listens, how
// machines reach it, its certificate, and its boot listener.
func (s Server) args(ns string) []string {
	args := []string{
		"--" + s.Name + "-listen-address=:" + strconv.Itoa(int(s.Port)),
		"--" + s.Name + "-url=" + s.URL(),
		"--" + s.Name + "-cert-file=" + s.TLSFile("tls.crt"),
		"--" + s.Name + "-key-file=" + s.TLSFile("tls.key"),
		"--" + s.Name + "-ca-file=" + s.TLSFile("ca.crt"),
	}
	if s.BootPort != 0 {
		args = append(args, "--"+s.Name+"-boot-listen-address=:"+strconv.Itoa(int(s.BootPort)), "--"+s.Name+"-boot-url="+s.BootURL(ns))
	}
	return args
}
