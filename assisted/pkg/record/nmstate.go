package record

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// ErrInput matches (errors.Is) the errors in what a person wrote, as
// opposed to the service's own: conditions report them as input errors.
// Their text is the inner error's alone, as upstream's messages have it.
var ErrInput = errors.New("input error")

// inputError marks err as an input error without changing its text.
type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{ErrInput, e.err} }
func inputErrorf(format string, args ...any) error {
	return inputError{fmt.Errorf(format, args...)}
}

// InputError marks err as an input error (errors.Is(err, ErrInput)) without
// changing its text.
func InputError(err error) error { return inputError{err} }

// StaticNetwork returns the NMStateConfigs an InfraEnv's
// nmStateConfigLabelSelector selects in the InfraEnv's namespace (upstream
// selects in every namespace: here another tenant's NMStateConfig never
// lands in an image; an empty selector selects none), sorted by name,
// validated with upstream's messages (host N counts from 0 in that order).
func StaticNetwork(ctx context.Context, r client.Reader, ie *agentinstallv1.InfraEnv) ([]deployapi.StaticNetworkHost, error) {
	sel := ie.Spec.NMStateConfigLabelSelector
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return nil, nil
	}
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return nil, inputErrorf("nmStateConfigLabelSelector: %w", err)
	}
	l := &agentinstallv1.NMStateConfigList{}
	if err := r.List(ctx, l, client.InNamespace(ie.Namespace), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return nil, err
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	var out []deployapi.StaticNetworkHost
	for i, c := range l.Items {
		h, err := staticHost(i, &c)
		if err != nil {
			return nil, inputError{err}
		}
		out = append(out, h)
	}
	return out, nil
}

// staticHost validates NMStateConfig number i.
func staticHost(i int, c *agentinstallv1.NMStateConfig) (deployapi.StaticNetworkHost, error) {
	h := deployapi.StaticNetworkHost{}
	if len(c.Spec.Interfaces) == 0 {
		return h, fmt.Errorf("at least one interface for host %d must be provided", i)
	}
	macs, names := map[string]bool{}, map[string]bool{}
	for _, in := range c.Spec.Interfaces {
		if in == nil {
			continue
		}
		// The live image compares it with its NICs' addresses as the
		// kernel spells them.
		hw, err := net.ParseMAC(in.MacAddress)
		if err != nil {
			return h, fmt.Errorf("the MAC address %q of interface %s of host %d is not a MAC address", in.MacAddress, in.Name, i)
		}
		mac := hw.String()
		if macs[mac] || names[in.Name] {
			return h, fmt.Errorf("MACs and Interfaces for host %d must be unique", i)
		}
		macs[mac], names[in.Name] = true, true
		h.MACInterfaceMap = append(h.MACInterfaceMap, deployapi.MACInterface{MACAddress: mac, LogicalNICName: in.Name})
	}
	var raw []byte
	if c.Spec.NetConfig != nil {
		raw = c.Spec.NetConfig.Raw
	}
	if len(raw) == 0 {
		return h, fmt.Errorf("failed to validate network yaml for host %d, nmstate GenerateConfiguration failed, error: the config is empty", i)
	}
	y, err := yaml.JSONToYAML(raw)
	if err != nil {
		return h, fmt.Errorf("failed to validate network yaml for host %d, nmstate GenerateConfiguration failed, error: %w", i, err)
	}
	cfg, err := deployapi.ParseNetworkConfig(y)
	if err != nil {
		return h, fmt.Errorf("failed to validate network yaml for host %d, nmstate GenerateConfiguration failed, error: %w", i, err)
	}
	for _, ifc := range cfg.Interfaces {
		if ifc.Type == "ethernet" && !names[ifc.Name] {
			return h, fmt.Errorf("mac-interface mapping for interface %s is missing and not a physical interface", ifc.Name)
		}
	}
	h.NetworkYAML = string(y)
	return h, nil
}

// Digest is a short digest of what makes a discovery image: two images
// with the same digest are the same bytes.
func Digest(parts ...any) string {
	data, _ := json.Marshal(parts)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
