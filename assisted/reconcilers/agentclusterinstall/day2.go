package agentclusterinstall

import (
	"context"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/internal/certs"
)

// CSRApprovalReason is the reason of the Approved condition the service
// sets on the CSRs of the hosts it adds to an installed cluster.
const CSRApprovalReason = "AgentServiceApprove"

// nodeUserPrefix is the user name prefix of a node's kubelet.
const nodeUserPrefix = "system:node:"

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
	touched := map[*agentinstallv1.Agent]bool{}
	for i := range list.Items {
		csr := &list.Items[i]
		a, typ := in.csrHost(csr, hosts)
		if a == nil {
			continue
		}
		if !decided(csr) {
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
			a.Status.CSRStatus.ApprovedCSRs = append(a.Status.CSRStatus.ApprovedCSRs, agentinstallv1.CSRInfo{Name: csr.Name, Type: typ, ApprovedAt: at})
			touched[a] = true
		}
	}
	for a := range touched {
		a.Status.CSRStatus.LastApprovalAttempt = now
		if err := in.r.Client.Status().Update(ctx, a); err != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// csrHost is the joining host a kubelet CSR is for, and the CSR's type:
// a client certificate asked for with the bootstrap token (the node name
// is the request's common name), or a serving certificate asked for by
// the node itself.
func (in *install) csrHost(csr *certificatesv1.CertificateSigningRequest, hosts map[string]*agentinstallv1.Agent) (*agentinstallv1.Agent, agentinstallv1.CSRType) {
	switch csr.Spec.SignerName {
	case certificatesv1.KubeAPIServerClientKubeletSignerName:
		req, err := certs.ParseRequest(csr.Spec.Request)
		if err != nil || !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix) {
			return nil, ""
		}
		return hosts[strings.TrimPrefix(req.Subject.CommonName, nodeUserPrefix)], agentinstallv1.CSRTypeClient
	case certificatesv1.KubeletServingSignerName:
		if !strings.HasPrefix(csr.Spec.Username, nodeUserPrefix) {
			return nil, ""
		}
		return hosts[strings.TrimPrefix(csr.Spec.Username, nodeUserPrefix)], agentinstallv1.CSRTypeServing
	}
	return nil, ""
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
