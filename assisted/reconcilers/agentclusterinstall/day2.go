package agentclusterinstall

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/internal/certs"
)

// CSRApprovalReason is the reason of the Approved condition the service
// sets on the CSRs of the hosts it adds to an installed cluster.
const CSRApprovalReason = "AgentServiceApprove"

// Who may ask for a joining node's certificates.
const (
	// nodeUserPrefix is the user name prefix of a node's kubelet, and of
	// the common name of its certificates.
	nodeUserPrefix = "system:node:"
	// nodesGroup is the kubelets' group, their certificates' organization.
	nodesGroup = "system:nodes"
	// NodeBootstrapperUser asks for a new node's client certificate in an
	// OpenShift cluster: the machine-config-server hands joining nodes a
	// kubeconfig with this service account's token.
	NodeBootstrapperUser = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
	// bootstrapTokenUserPrefix and bootstrappersGroup are the user and
	// group of a Kubernetes bootstrap token, the node bootstrapper of
	// clusters that join kubelets the kubeadm way (the simulator's).
	bootstrapTokenUserPrefix = "system:bootstrap:"
	bootstrappersGroup       = "system:bootstrappers"
)

// day2Joining tells whether a host added to the installed cluster rebooted
// into it and its Node is not Ready there yet.
func (in *install) day2Joining() bool {
	for i := range in.agents {
		if joining(&in.agents[i]) {
			return true
		}
	}
	return false
}

func joining(a *agentinstallv1.Agent) bool {
	switch assistedapi.HostStage(a.Status.Progress.CurrentStage) {
	case assistedapi.StageRebooting, assistedapi.StageConfiguring, assistedapi.StageWaitingForIgnition, assistedapi.StageJoined:
		return true
	}
	return false
}

// approveCSRs approves, in the installed cluster, the pending kubelet CSRs
// of the hosts that join it after its install (the in-cluster controller
// approved those of the install's own hosts and is done), as upstream's
// service does for hosts no Machine stands for; each approval is recorded
// in the Agent's status.csrStatus.
func (in *install) approveCSRs(ctx context.Context) error {
	hosts := map[string]*agentinstallv1.Agent{}
	for i := range in.agents {
		if a := &in.agents[i]; joining(a) {
			hosts[rec.Hostname(a)] = a
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	kc, err := in.adminKubeconfig(ctx)
	if err != nil {
		return err
	}
	spoke, err := rec.SpokeClient(kc, spokeScheme)
	if err != nil {
		return err
	}
	list := &certificatesv1.CertificateSigningRequestList{}
	if err := spoke.List(ctx, list); err != nil {
		return err
	}
	now := metav1.NewTime(in.now)
	touched := map[*agentinstallv1.Agent]*agentinstallv1.Agent{} // the Agents whose csrStatus changed, and before
	for i := range list.Items {
		csr := &list.Items[i]
		if decided(csr) && !approvedBy(csr, CSRApprovalReason) {
			continue
		}
		a, typ, refusal := csrHost(csr, hosts)
		if a == nil {
			continue
		}
		if !decided(csr) {
			if refusal == "" && typ == agentinstallv1.CSRTypeClient {
				if refusal, err = nodeExists(ctx, spoke, rec.Hostname(a)); err != nil {
					return err
				}
			}
			if refusal != "" {
				in.r.Recorder.Eventf(a, corev1.EventTypeWarning, "CSRNotApproved", "Not approving the %s certificate signing request %s in the installed cluster: %s",
					typ, csr.Name, refusal)
				continue
			}
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: CSRApprovalReason,
				Message:        fmt.Sprintf("Approved by the agent service for host %s (%s), added to the installed cluster", a.Name, rec.Hostname(a)),
				LastUpdateTime: now,
			})
			if err := spoke.SubResource("approval").Update(ctx, csr); err != nil {
				if apierrors.IsConflict(err) {
					continue
				}
				return fmt.Errorf("approving CSR %s: %w", csr.Name, err)
			}
			in.r.Recorder.Eventf(a, corev1.EventTypeNormal, "CSRApproved", "Approved the %s certificate signing request %s of host %s in the installed cluster", typ, csr.Name, rec.Hostname(a))
		}
		// The record follows the installed cluster: a CSR approved here
		// whose recording was lost (a conflict, a restart) is recorded later.
		if approvedBy(csr, CSRApprovalReason) && !recorded(a, csr.Name) {
			at := now
			for _, c := range csr.Status.Conditions {
				if c.Type == certificatesv1.CertificateApproved && !c.LastUpdateTime.IsZero() {
					at = c.LastUpdateTime
				}
			}
			if touched[a] == nil {
				touched[a] = a.DeepCopy()
			}
			a.Status.CSRStatus.ApprovedCSRs = append(a.Status.CSRStatus.ApprovedCSRs, agentinstallv1.CSRInfo{Name: csr.Name, Type: typ, ApprovedAt: at})
		}
	}
	// status.csrStatus is this reconciler's field of the Agent: a patch of
	// it alone. A record lost (the reconcile cut short) is made again from
	// the installed cluster's CSRs next time.
	for a, before := range touched {
		a.Status.CSRStatus.LastApprovalAttempt = now
		if err := in.r.Client.Status().Patch(ctx, a, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	return nil
}

// csrHost is the joining host a kubelet CSR is for (nil: none of them;
// the CSR is someone else's business), the CSR's type, and why it must
// not be approved ("" when it may). The node name is the hostname the hub
// expects of the host (its spec's, else the one it had when its install
// started; its inventory is not taken after that), never one the request
// makes up. A client certificate must be asked for by the node
// bootstrapper, for the node's identity, for client use only; a serving
// certificate by the node itself, for its own names and addresses. The
// caller still checks that no Node of a client request's name exists.
func csrHost(csr *certificatesv1.CertificateSigningRequest, hosts map[string]*agentinstallv1.Agent) (*agentinstallv1.Agent, agentinstallv1.CSRType, string) {
	var typ agentinstallv1.CSRType
	switch csr.Spec.SignerName {
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		typ = agentinstallv1.CSRTypeClient
	case certificatesv1.KubeletServingSignerName:
		typ = agentinstallv1.CSRTypeServing
	default:
		return nil, "", ""
	}
	req, err := certs.ParseRequest(csr.Spec.Request)
	if err != nil {
		return nil, "", ""
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, nodeUserPrefix)
	a := hosts[name]
	switch {
	case !ok || a == nil:
		return nil, "", ""
	case !slices.Equal(req.Subject.Organization, []string{nodesGroup}):
		return a, typ, fmt.Sprintf("its organization is %q, not [%s]", req.Subject.Organization, nodesGroup)
	case typ == agentinstallv1.CSRTypeClient:
		return a, typ, clientRefusal(csr, req)
	}
	return a, typ, servingRefusal(csr, req, a, name)
}

// clientRefusal is why a node client CSR must not be approved.
func clientRefusal(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) string {
	u := csr.Spec.Username
	bootstrapper := u == NodeBootstrapperUser ||
		(strings.HasPrefix(u, bootstrapTokenUserPrefix) && slices.Contains(csr.Spec.Groups, bootstrappersGroup))
	switch {
	case !bootstrapper:
		return fmt.Sprintf("it was asked for by %q, not by the node bootstrapper", u)
	case !usagesWithin(csr.Spec.Usages, certificatesv1.UsageClientAuth):
		return fmt.Sprintf("its usages %v are not a kubelet client's", csr.Spec.Usages)
	case len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0:
		return "a client certificate request names hosts"
	}
	return ""
}

// servingRefusal is why a kubelet serving CSR of the node name of a must
// not be approved.
func servingRefusal(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, a *agentinstallv1.Agent, name string) string {
	switch {
	case csr.Spec.Username != nodeUserPrefix+name || !slices.Contains(csr.Spec.Groups, nodesGroup):
		return fmt.Sprintf("it was asked for by %q, not by node %s", csr.Spec.Username, name)
	case !usagesWithin(csr.Spec.Usages, certificatesv1.UsageServerAuth):
		return fmt.Sprintf("its usages %v are not a kubelet server's", csr.Spec.Usages)
	case len(req.EmailAddresses)+len(req.URIs) > 0:
		return "it names e-mail addresses or URIs"
	}
	for _, d := range req.DNSNames {
		if d != name && !strings.HasPrefix(d, name+".") {
			return fmt.Sprintf("it names %q, not the node's name", d)
		}
	}
	addrs := agentAddresses(a)
	for _, ip := range req.IPAddresses {
		if !addrs[ip.String()] {
			return fmt.Sprintf("it names address %s, which the host does not have", ip)
		}
	}
	return ""
}

// usagesWithin tells whether usages has need and, besides, only the
// signature usages any kubelet certificate has.
func usagesWithin(usages []certificatesv1.KeyUsage, need certificatesv1.KeyUsage) bool {
	for _, u := range usages {
		if u != need && u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageKeyEncipherment {
			return false
		}
	}
	return slices.Contains(usages, need)
}

// agentAddresses are the IP addresses of the host's inventory.
func agentAddresses(a *agentinstallv1.Agent) map[string]bool {
	out := map[string]bool{}
	for _, n := range a.Status.Inventory.Interfaces {
		for _, cidr := range append(append([]string(nil), n.IPV4Addresses...), n.IPV6Addresses...) {
			if ip, _, err := net.ParseCIDR(cidr); err == nil {
				out[ip.String()] = true
			} else if ip := net.ParseIP(cidr); ip != nil {
				out[ip.String()] = true
			}
		}
	}
	return out
}

// nodeExists is a refusal when the installed cluster has a Node named
// name already: a new node's first client certificate must not make its
// holder an existing node.
func nodeExists(ctx context.Context, spoke client.Client, name string) (string, error) {
	err := spoke.Get(ctx, types.NamespacedName{Name: name}, &corev1.Node{})
	switch {
	case err == nil:
		return fmt.Sprintf("the installed cluster has a Node %s already", name), nil
	case apierrors.IsNotFound(err):
		return "", nil
	}
	return "", fmt.Errorf("reading Node %s: %w", name, err)
}

// decided tells whether a CSR was approved or denied already.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

// approvedBy tells whether a CSR's Approved condition has reason.
func approvedBy(csr *certificatesv1.CertificateSigningRequest, reason string) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

func recorded(a *agentinstallv1.Agent, csr string) bool {
	for _, c := range a.Status.CSRStatus.ApprovedCSRs {
		if c.Name == csr {
			return true
		}
	}
	return false
}
