package installconfig

import (
	"fmt"
	"slices"

	"sigs.k8s.io/yaml"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Sanitize returns the copy of an install-config that may leave the hub:
// the bootstrap node's /opt/openshift/install-config.yaml and the
// installed cluster's kube-system/cluster-config-v1. It holds no pull
// secret (pullSecret is "") and no BMC credentials (every
// platform.baremetal.hosts[].bmc.username and .password is "", and a BMC
// address keeps no userinfo); everything else is kept. The install-config
// is parsed and marshalled again rather than edited as text, so that no
// YAML style (block scalars, quoted or multi-line flow strings) can carry
// a secret past it. It is the only function that makes such a copy: a
// consumer that needs the pull secret (the bootstrap node pulling images)
// gets it as a file of its own.
func Sanitize(raw []byte) ([]byte, error) {
	ic, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	out := *ic
	out.PullSecret = ""
	if bm := ic.Platform.BareMetal; bm != nil {
		b := *bm
		b.Hosts = slices.Clone(bm.Hosts)
		for i := range b.Hosts {
			bmc := &b.Hosts[i].BMC
			bmc.Username, bmc.Password = "", ""
			bmc.Address = metal3v1.BMCAddressWithoutUserinfo(bmc.Address)
		}
		out.Platform.BareMetal = &b
	}
	if em := ic.Platform.EquinixMetal; em != nil {
		// Paths on the installer's machine: the key files stay there.
		e := *em
		e.APIKeyFile = ""
		if em.DNS != nil {
			d := *em.DNS
			d.TSIGKeyFile = ""
			e.DNS = &d
		}
		out.Platform.EquinixMetal = &e
	}
	data, err := yaml.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("writing the sanitized install-config: %w", err)
	}
	return data, nil
}

// HasSecrets says whether an install-config copy still holds the pull
// secret or a BMC username or password, for renderers that must only
// ship Sanitize's copy.
func HasSecrets(raw []byte) (bool, error) {
	ic, err := Parse(raw)
	if err != nil {
		return false, err
	}
	if ic.PullSecret != "" {
		return true, nil
	}
	if bm := ic.Platform.BareMetal; bm != nil {
		for _, h := range bm.Hosts {
			if h.BMC.Username != "" || h.BMC.Password != "" || metal3v1.BMCAddressWithoutUserinfo(h.BMC.Address) != h.BMC.Address {
				return true, nil
			}
		}
	}
	return false, nil
}
