package localcp

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// serviceCIDR is the hub's service network. Nothing routes it: the hub
// runs no pods; kube-apiserver requires one.
const serviceCIDR = "10.0.0.0/24"

// KubernetesServiceIP is the cluster IP of the hub's `kubernetes` Service,
// the first of serviceCIDR, which kube-apiserver's serving certificate
// holds: what pods' in-cluster configs connect to.
const KubernetesServiceIP = "10.0.0.1"

func (h *Hub) child(name string, args ...string) (*process, error) {
	path, err := findBinary(h.opts.BinDir, name)
	if err != nil {
		return nil, err
	}
	return &process{
		name: name, path: path, args: args,
		runDir: h.runDir(), logPath: filepath.Join(h.logDir(), name+".log"),
	}, nil
}

func (h *Hub) etcdURL() string { return "https://127.0.0.1:" + strconv.Itoa(h.ports.EtcdClient) }

func (h *Hub) etcd() (*process, error) {
	peer := "http://127.0.0.1:" + strconv.Itoa(h.ports.EtcdPeer)
	return h.child("etcd",
		"--name=metalshift-hub",
		"--data-dir="+filepath.Join(h.dir, "etcd"),
		"--listen-client-urls="+h.etcdURL(),
		"--advertise-client-urls="+h.etcdURL(),
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=metalshift-hub="+peer,
		"--listen-metrics-urls=",
		"--cert-file="+h.pki.cert("etcd-server"),
		"--key-file="+h.pki.key("etcd-server"),
		"--trusted-ca-file="+h.pki.cert("ca"),
		"--client-cert-auth=true",
		"--auto-compaction-mode=periodic",
		"--auto-compaction-retention=1h",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	)
}

func (h *Hub) etcdHealthy(ctx context.Context) error {
	c, err := h.tlsClient("apiserver-etcd-client")
	if err != nil {
		return err
	}
	return GetOK(ctx, c, h.etcdURL()+"/health")
}

// APIServerMemoryLimit is the Go soft memory limit of the kube-apiserver
// children (the hub's and the simulator's): most of their peak is garbage
// from building the OpenAPI of every CRD at start, which the limit makes
// the runtime collect early (measured after start: 414 MiB peak without,
// 331 MiB with this limit, start 0.4s slower). A soft limit: a larger live
// heap is never refused. $GOMEMLIMIT, when set, wins.
const APIServerMemoryLimit = "256MiB"

// APIServerEnv is the environment added to a kube-apiserver child.
func APIServerEnv() []string {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return []string{"GOMEMLIMIT=" + APIServerMemoryLimit}
}

func (h *Hub) apiserver() (*process, error) {
	p, err := h.child("kube-apiserver",
		"--etcd-servers="+h.etcdURL(),
		"--etcd-cafile="+h.pki.cert("ca"),
		"--etcd-certfile="+h.pki.cert("apiserver-etcd-client"),
		"--etcd-keyfile="+h.pki.key("apiserver-etcd-client"),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(h.ports.APIServer),
		"--tls-cert-file="+h.pki.cert("apiserver"),
		"--tls-private-key-file="+h.pki.key("apiserver"),
		"--client-ca-file="+h.pki.cert("ca"),
		"--service-account-key-file="+filepath.Join(h.pki.dir, "sa.pub"),
		"--service-account-signing-key-file="+h.pki.key("sa"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--endpoint-reconciler-type=none",
		"--v=1",
	)
	if p != nil {
		p.env = APIServerEnv()
		if h.opts.ServiceProxySocket != "" {
			config, err := h.writeEgressSelector()
			if err != nil {
				return nil, err
			}
			p.args = append(p.args, "--egress-selector-config-file="+config)
		}
	}
	return p, err
}

// writeEgressSelector writes kube-apiserver's egress selector
// configuration: connections to the cluster's network (Services) go
// through the HTTP CONNECT proxy at Options.ServiceProxySocket.
func (h *Hub) writeEgressSelector() (string, error) {
	path := filepath.Join(h.runDir(), "egress-selector.yaml")
	config := `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: ` + strconv.Quote(h.opts.ServiceProxySocket) + "\n"
	return path, os.WriteFile(path, []byte(config), 0o600)
}

func (h *Hub) apiserverReady(ctx context.Context) error {
	c, err := h.tlsClient("admin")
	if err != nil {
		return err
	}
	return GetOK(ctx, c, h.Server()+"/readyz")
}

// kubeControllerManagerControllers are the controllers a hub needs from
// kube-controller-manager: owner-reference garbage collection (Cluster API
// and metalshift rely on it), namespace deletion, and service accounts with
// their tokens.
var kubeControllerManagerControllers = []string{
	"garbage-collector-controller", "namespace-controller", "serviceaccount-controller",
	"serviceaccount-token-controller", "root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
}

func (h *Hub) controllerManager() (*process, error) {
	kubeconfig := filepath.Join(h.pki.dir, "controller-manager.kubeconfig")
	p, err := h.child("kube-controller-manager",
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(append(slices.Clone(kubeControllerManagerControllers), h.opts.Controllers...), ","),
		"--service-account-private-key-file="+h.pki.key("sa"),
		"--root-ca-file="+h.pki.cert("ca"),
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(h.ports.ControllerManager),
		"--tls-cert-file="+h.pki.cert("controller-manager-serving"),
		"--tls-private-key-file="+h.pki.key("controller-manager-serving"),
		"--v=1",
	)
	if p != nil {
		// It keeps no state, and ignores SIGTERM until its caches sync.
		p.stopTimeout = 2 * time.Second
	}
	return p, err
}

func (h *Hub) controllerManagerHealthy(ctx context.Context) error {
	c, err := h.tlsClient("admin")
	if err != nil {
		return err
	}
	return GetOK(ctx, c, "https://127.0.0.1:"+strconv.Itoa(h.ports.ControllerManager)+"/healthz")
}
