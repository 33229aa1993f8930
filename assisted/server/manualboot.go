package server

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
)

// maxManualBootMACs caps the MAC addresses a manual-boot report may carry
// and those the condition lists.
const maxManualBootMACs = 32

// macPattern finds the MAC addresses a ManualBootCondition's message lists.
var macPattern = regexp.MustCompile(`(?i)\b[0-9a-f]{2}(?::[0-9a-f]{2}){5}\b`)

// manualBoot records, on the InfraEnv, that a machine booted its
// converged-flow image without a BareMetalHost: such an image waits for the
// host engine, as the seed warns, and would leave the person who booted it
// with nothing on the hub but silence. It is idempotent per MAC address: a
// machine that reports again, or one whose MACs are listed already,
// changes nothing and records no new Event.
func (s *Server) manualBoot(w http.ResponseWriter, r *http.Request) {
	ie, ok := s.infraEnv(w, r, r.PathValue("ie"))
	if !ok {
		return
	}
	var mb assistedapi.ManualBoot
	if !decode(w, r, &mb, "a ManualBoot") {
		return
	}
	macs, err := manualBootMACs(mb.MACAddresses)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	var msg string
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		msg = ""
		cur := &agentinstallv1.InfraEnv{}
		if err := s.opts.Client.Get(ctx, client.ObjectKeyFromObject(ie), cur); err != nil {
			return err
		}
		var known []string
		for _, c := range cur.Status.Conditions {
			if string(c.Type) == conditions.ManualBootCondition && c.Status == corev1.ConditionTrue {
				known = macPattern.FindAllString(c.Message, -1)
			}
		}
		all, added := mergeMACs(known, macs)
		if !added {
			return nil
		}
		msg = manualBootMessage(all, ie.Name)
		conditions.Set(&cur.Status.Conditions, s.opts.Clock.Now(), conditions.Cond{Type: conditions.ManualBootCondition, Status: corev1.ConditionTrue, Reason: conditions.ManualBootReason, Message: msg})
		return s.opts.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if msg != "" {
		s.event(ie, corev1.EventTypeWarning, conditions.ManualBootReason, manualBootMessage(macs, ie.Name))
		logf(ctx, "Converged-flow image booted by hand", "infraEnv", ie.Namespace+"/"+ie.Name, "macs", strings.Join(macs, ", "))
	}
	w.WriteHeader(http.StatusNoContent)
}

// manualBootMACs are a report's MAC addresses, checked and lower-cased.
func manualBootMACs(in []string) ([]string, error) {
	if len(in) == 0 || len(in) > maxManualBootMACs {
		return nil, fmt.Errorf("mac_addresses must list 1 to %d MAC addresses", maxManualBootMACs)
	}
	out := make([]string, 0, len(in))
	for _, m := range in {
		hw, err := net.ParseMAC(m)
		if err != nil || len(hw) != 6 {
			return nil, fmt.Errorf("mac_addresses: %.32q is not a MAC address", m)
		}
		out = append(out, hw.String())
	}
	return out, nil
}

// mergeMACs adds macs to known, up to maxManualBootMACs in all, sorted;
// added tells whether one was new.
func mergeMACs(known, macs []string) (all []string, added bool) {
	all = append([]string(nil), known...)
	for _, m := range macs {
		if !slices.Contains(all, m) && len(all) < maxManualBootMACs {
			all, added = append(all, m), true
		}
	}
	slices.Sort(all)
	return all, added
}

func manualBootMessage(macs []string, ieName string) string {
	return fmt.Sprintf("Machines with MAC %s booted this InfraEnv's discovery image by hand. The image of an InfraEnv annotated %s: \"true\" "+
		"(the converged flow) is booted by the host engine for BareMetalHosts labelled %s=%s, and the machine waits for one: "+
		"create or label a BareMetalHost with its boot MAC, or boot machines by hand from an InfraEnv without such hosts",
		strings.Join(macs, ", "), agentinstallv1.EnableIronicAgentAnnotation, agentinstallv1.InfraEnvNameLabel, ieName)
}
