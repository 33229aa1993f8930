package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// ManualBootCondition on an InfraEnv whose converged-flow image a machine
// booted by hand (metalshift's; upstream's InfraEnv has only ImageCreated):
// True, reason ManualBootReason, the machine and what to do in the message.
const (
	ManualBootCondition = "ImageBootedByHand"
	ManualBootReason    = "NeedsHostEngine"
)

// manualBoot records, on the InfraEnv, that a machine booted its
// converged-flow image without a BareMetalHost: such an image waits for the
// host engine, as the seed warns, and would leave the person who booted it
// with nothing on the hub but silence.
func (s *Server) manualBoot(w http.ResponseWriter, r *http.Request) {
	ie, ok := s.infraEnv(w, r, r.PathValue("ie"))
	if !ok {
		return
	}
	var mb assistedapi.ManualBoot
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&mb); err != nil || len(mb.MACAddresses) == 0 {
		apiError(w, http.StatusBadRequest, "the body must be a ManualBoot with mac_addresses")
		return
	}
	macs := strings.Join(mb.MACAddresses, ", ")
	msg := fmt.Sprintf("A machine with MAC %s booted this InfraEnv's discovery image by hand. The image of an InfraEnv annotated %s: \"true\" "+
		"(the converged flow) is booted by the host engine for BareMetalHosts labelled %s=%s, and the machine waits for one: "+
		"create or label a BareMetalHost with its boot MAC, or boot machines by hand from an InfraEnv without such hosts",
		macs, EnableIronicAgentAnnotation, agentinstallv1.InfraEnvNameLabel, ie.Name)
	ctx := r.Context()
	changed := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &agentinstallv1.InfraEnv{}
		if err := s.opts.Client.Get(ctx, client.ObjectKeyFromObject(ie), cur); err != nil {
			return err
		}
		for _, c := range cur.Status.Conditions {
			if string(c.Type) == ManualBootCondition && c.Status == corev1.ConditionTrue && c.Message == msg {
				return nil
			}
		}
		now := metav1.NewTime(s.opts.Clock.Now())
		cond := agentinstallv1.Condition{Type: ManualBootCondition, Status: corev1.ConditionTrue, Reason: ManualBootReason,
			Message: msg, LastTransitionTime: now}
		replaced := false
		for i, c := range cur.Status.Conditions {
			if string(c.Type) == ManualBootCondition {
				if c.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = c.LastTransitionTime
				}
				cur.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			cur.Status.Conditions = append(cur.Status.Conditions, cond)
		}
		changed = true
		return s.opts.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if changed && s.opts.Recorder != nil {
		s.opts.Recorder.Event(ie, corev1.EventTypeWarning, ManualBootReason, msg)
	}
	logf(ctx, "Converged-flow image booted by hand", "infraEnv", ie.Namespace+"/"+ie.Name, "macs", macs)
	w.WriteHeader(http.StatusNoContent)
}
