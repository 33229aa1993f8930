// Package installconfig (api/installconfig/v1) is the install-config wire
// contract, shared by the installer, the providers and the simulator: it reads and validates an OpenShift install-config
// (apiVersion v1) for the bare-metal platform: the subset of fields metalshift
// acts on, with openshift-install's field names. Unknown fields are an error,
// so that a typo does not pass silently.
package installconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// InstallConfig is an install-config.yaml.
type InstallConfig struct {
	APIVersion   string        `json:"apiVersion"`
	BaseDomain   string        `json:"baseDomain"`
	Metadata     Metadata      `json:"metadata"`
	ControlPlane MachinePool   `json:"controlPlane"`
	Compute      []MachinePool `json:"compute,omitempty"`
	Networking   *Networking   `json:"networking,omitempty"`
	Platform     Platform      `json:"platform"`
	PullSecret   string        `json:"pullSecret"`
	SSHKey       string        `json:"sshKey,omitempty"`
	// FIPS asks for a cluster in FIPS mode (openshift-install's fips).
	FIPS       bool        `json:"fips,omitempty"`
	Metalshift *Metalshift `json:"metalshift,omitempty"`
}

// Metadata names the cluster.
type Metadata struct {
	Name string `json:"name"`
}

// MachinePool is the control plane or a compute pool.
type MachinePool struct {
	Name     string `json:"name"`
	Replicas *int32 `json:"replicas,omitempty"`
}

// Networking are the cluster's networks.
type Networking struct {
	MachineNetwork []CIDR   `json:"machineNetwork,omitempty"`
	ClusterNetwork []CIDRs  `json:"clusterNetwork,omitempty"`
	ServiceNetwork []string `json:"serviceNetwork,omitempty"`
	NetworkType    string   `json:"networkType,omitempty"`
}

// CIDR is a machine network.
type CIDR struct {
	CIDR string `json:"cidr"`
}

// CIDRs is a cluster network.
type CIDRs struct {
	CIDR       string `json:"cidr"`
	HostPrefix int32  `json:"hostPrefix,omitempty"`
}

// Platform holds the one platform of the cluster.
type Platform struct {
	BareMetal    *BareMetal    `json:"baremetal,omitempty"`
	EquinixMetal *EquinixMetal `json:"equinixMetal,omitempty"`
	None         *struct{}     `json:"none,omitempty"`
}

// BareMetal is the bare-metal platform.
type BareMetal struct {
	APIVIPs     []string `json:"apiVIPs"`
	IngressVIPs []string `json:"ingressVIPs,omitempty"`
	Hosts       []Host   `json:"hosts"`
}

// Host is one machine of platform.baremetal.hosts.
type Host struct {
	Name            string           `json:"name"`
	Role            string           `json:"role,omitempty"`
	BMC             BMC              `json:"bmc"`
	BootMACAddress  string           `json:"bootMACAddress"`
	BootMode        string           `json:"bootMode,omitempty"`
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`
}

// BMC is how to reach a host's BMC.
type BMC struct {
	Address                        string `json:"address"`
	Username                       string `json:"username"`
	Password                       string `json:"password"`
	DisableCertificateVerification bool   `json:"disableCertificateVerification,omitempty"`
}

// RootDeviceHints choose the install disk.
type RootDeviceHints struct {
	DeviceName       string `json:"deviceName,omitempty"`
	MinSizeGigabytes int    `json:"minSizeGigabytes,omitempty"`
	Model            string `json:"model,omitempty"`
	SerialNumber     string `json:"serialNumber,omitempty"`
	WWN              string `json:"wwn,omitempty"`
	Rotational       *bool  `json:"rotational,omitempty"`
}

// Metalshift holds what the installer needs beyond openshift-install's
// fields: the OS image hosts are provisioned with and the release.
type Metalshift struct {
	// OSImage is written to every host.
	OSImage OSImage `json:"osImage"`
	// Version is the OpenShift release, e.g. 4.20.0.
	Version string `json:"version,omitempty"`
	// KubernetesVersion is the release's Kubernetes version.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
}

// OSImage is an image URL and its checksum.
type OSImage struct {
	URL          string `json:"url"`
	Checksum     string `json:"checksum"`
	ChecksumType string `json:"checksumType,omitempty"`
}

// Host roles.
const (
	RoleMaster = "master"
	RoleWorker = "worker"
)

// Parse reads an install-config, rejecting unknown fields.
func Parse(data []byte) (*InstallConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("install-config is not YAML: %w", yamlError(err))
	}
	// Decoded as openshift-install decodes it (encoding/json: names match
	// regardless of case), so that an install-config it accepts parses here.
	ic := &InstallConfig{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ic); err != nil {
		return nil, fmt.Errorf("reading install-config: %w", withPath(js, err))
	}
	return ic, nil
}

// yamlError is err of the YAML reader without the values some of its
// messages quote (cannot decode !!str `<value>` as a !!int; unsupported
// map key ..., value: <the key's whole value>): the value may be the pull
// secret. Syntax errors say where, not what, and are kept.
func yamlError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "cannot decode "):
		return errors.New("a tagged value does not read as its tag (such as !!int on text)")
	case strings.Contains(msg, "map key"):
		return errors.New("a mapping key is not a string (it is null, a list or a mapping)")
	case strings.Contains(msg, "unknown anchor"):
		return errors.New("an alias names no anchor")
	}
	return err
}

// withPath names an unknown field with its path, which encoding/json does
// not: Kubernetes' decoder says platform.baremetal.hosts[0].bmc.pasword.
func withPath(js []byte, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return err
	}
	var where InstallConfig
	strict, _ := kjson.UnmarshalStrict(js, &where, kjson.DisallowUnknownFields)
	for _, s := range strict {
		if msg := s.Error(); strings.HasSuffix(msg, "."+strings.Trim(name, `"`)+`"`) || msg == "unknown field "+name {
			return errors.New(msg)
		}
	}
	return err
}

// Default releases when the install-config does not say.
const (
	DefaultVersion           = "4.20.0"
	DefaultKubernetesVersion = "v1.33.5"
)

// Version is metalshift.version, default DefaultVersion.
func (ic *InstallConfig) Version() string {
	if ic.Metalshift != nil && ic.Metalshift.Version != "" {
		return ic.Metalshift.Version
	}
	return DefaultVersion
}

// KubernetesVersion is metalshift.kubernetesVersion, the release's
// Kubernetes (what its kubelets report), default DefaultKubernetesVersion.
func (ic *InstallConfig) KubernetesVersion() string {
	if ic.Metalshift != nil && ic.Metalshift.KubernetesVersion != "" {
		return ic.Metalshift.KubernetesVersion
	}
	return DefaultKubernetesVersion
}

// ControlPlaneReplicas is controlPlane.replicas, default 3.
func (ic *InstallConfig) ControlPlaneReplicas() int32 {
	if ic.ControlPlane.Replicas != nil {
		return *ic.ControlPlane.Replicas
	}
	return 3
}

// WorkerReplicas is the sum of the compute pools' replicas (default 3 each).
func (ic *InstallConfig) WorkerReplicas() int32 {
	var n int32
	for _, p := range ic.Compute {
		if p.Replicas == nil {
			n += 3
		} else {
			n += *p.Replicas
		}
	}
	return n
}

// APIVIP is the first API VIP: on Equinix Metal, the API's elastic IP.
func (ic *InstallConfig) APIVIP() string {
	if em := ic.Platform.EquinixMetal; em != nil {
		return em.APIVIP
	}
	if ic.Platform.BareMetal == nil || len(ic.Platform.BareMetal.APIVIPs) == 0 {
		return ""
	}
	return ic.Platform.BareMetal.APIVIPs[0]
}

// IngressVIP is the first ingress VIP ("" when none).
func (ic *InstallConfig) IngressVIP() string {
	if em := ic.Platform.EquinixMetal; em != nil {
		return em.IngressVIP
	}
	if bm := ic.Platform.BareMetal; bm != nil && len(bm.IngressVIPs) > 0 {
		return bm.IngressVIPs[0]
	}
	return ""
}

// ClusterDomain is <name>.<baseDomain>.
func (ic *InstallConfig) ClusterDomain() string { return ic.Metadata.Name + "." + ic.BaseDomain }

// APIInternalHost is api-int.<name>.<baseDomain>, where masters and
// workers reach the machine-config-server.
func (ic *InstallConfig) APIInternalHost() string { return "api-int." + ic.ClusterDomain() }

// APIHost is api.<name>.<baseDomain>.
func (ic *InstallConfig) APIHost() string { return "api." + ic.ClusterDomain() }

// Validate returns every problem with its field path.
func (ic *InstallConfig) Validate() field.ErrorList {
	var errs field.ErrorList
	if ic.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), ic.APIVersion, []string{"v1"}))
	}
	for _, msg := range validation.IsDNS1123Subdomain(ic.BaseDomain) {
		errs = append(errs, field.Invalid(field.NewPath("baseDomain"), ic.BaseDomain, msg))
	}
	for _, msg := range validation.IsDNS1123Label(ic.Metadata.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), ic.Metadata.Name, msg))
	}
	if ic.PullSecret == "" {
		errs = append(errs, field.Required(field.NewPath("pullSecret"), "the pull secret from console.redhat.com (any JSON for a simulated cluster)"))
	} else if !json.Valid([]byte(ic.PullSecret)) {
		errs = append(errs, field.Invalid(field.NewPath("pullSecret"), "<redacted>", "must be JSON"))
	}
	cp := field.NewPath("controlPlane")
	if ic.ControlPlane.Name != "" && ic.ControlPlane.Name != RoleMaster {
		errs = append(errs, field.NotSupported(cp.Child("name"), ic.ControlPlane.Name, []string{RoleMaster}))
	}
	if r := ic.ControlPlaneReplicas(); r != 1 && r != 3 && r != 5 {
		errs = append(errs, field.Invalid(cp.Child("replicas"), r, "must be 1, 3 or 5"))
	}
	for i, p := range ic.Compute {
		pp := field.NewPath("compute").Index(i)
		if p.Name != RoleWorker {
			errs = append(errs, field.NotSupported(pp.Child("name"), p.Name, []string{RoleWorker}))
		}
		if p.Replicas != nil && *p.Replicas < 0 {
			errs = append(errs, field.Invalid(pp.Child("replicas"), *p.Replicas, "must not be negative"))
		}
	}
	errs = append(errs, ic.validatePlatform()...)
	return errs
}

func (ic *InstallConfig) validatePlatform() field.ErrorList {
	var errs field.ErrorList
	pp := field.NewPath("platform")
	bm := ic.Platform.BareMetal
	if bm != nil && ic.Platform.EquinixMetal != nil {
		return append(errs, field.Forbidden(pp.Child("equinixMetal"), "one platform: baremetal or equinixMetal"))
	}
	if ic.Platform.EquinixMetal != nil {
		return append(ic.validateEquinixMetal(), ic.validateOSImage()...)
	}
	if bm == nil {
		return append(errs, field.Required(pp.Child("baremetal"), "metalshift installs on the baremetal or the equinixMetal platform"))
	}
	bp := pp.Child("baremetal")
	if len(bm.APIVIPs) == 0 {
		errs = append(errs, field.Required(bp.Child("apiVIPs"), "the address the API and machine-config-server answer at"))
	}
	for i, vip := range bm.APIVIPs {
		if net.ParseIP(vip) == nil {
			errs = append(errs, field.Invalid(bp.Child("apiVIPs").Index(i), vip, "must be an IP address"))
		}
	}
	for i, vip := range bm.IngressVIPs {
		if net.ParseIP(vip) == nil {
			errs = append(errs, field.Invalid(bp.Child("ingressVIPs").Index(i), vip, "must be an IP address"))
		}
	}
	names := map[string]int{}
	macs := map[string]int{}
	masters := int32(0)
	for i, h := range bm.Hosts {
		hp := bp.Child("hosts").Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(h.Name) {
			errs = append(errs, field.Invalid(hp.Child("name"), h.Name, msg))
		}
		if j, dup := names[h.Name]; dup {
			errs = append(errs, field.Duplicate(hp.Child("name"), fmt.Sprintf("%s (also hosts[%d])", h.Name, j)))
		}
		names[h.Name] = i
		switch h.Role {
		case RoleMaster:
			masters++
		case RoleWorker, "":
		default:
			errs = append(errs, field.NotSupported(hp.Child("role"), h.Role, []string{RoleMaster, RoleWorker, ""}))
		}
		if macErrs := metal3v1.ValidateMACAddressField(h.BootMACAddress, hp.Child("bootMACAddress")); len(macErrs) > 0 {
			errs = append(errs, macErrs...)
		} else {
			hw, _ := net.ParseMAC(h.BootMACAddress)
			mac := hw.String() // one spelling per address, for duplicates
			if j, dup := macs[mac]; dup {
				errs = append(errs, field.Duplicate(hp.Child("bootMACAddress"), fmt.Sprintf("%s (also hosts[%d])", h.BootMACAddress, j)))
			}
			macs[mac] = i
		}
		errs = append(errs, metal3v1.ValidateBMCAddressField(h.BMC.Address, hp.Child("bmc", "address"))...)
		if h.BMC.Username == "" {
			errs = append(errs, field.Required(hp.Child("bmc", "username"), ""))
		}
		if h.BMC.Password == "" {
			errs = append(errs, field.Required(hp.Child("bmc", "password"), ""))
		}
		if h.BootMode != "" && h.BootMode != "UEFI" && h.BootMode != "UEFISecureBoot" && h.BootMode != "legacy" {
			errs = append(errs, field.NotSupported(hp.Child("bootMode"), h.BootMode, []string{"UEFI", "UEFISecureBoot", "legacy"}))
		}
	}
	// One host more than the control plane: the bootstrap node runs on a
	// host of its own before it returns to the pool.
	need := ic.ControlPlaneReplicas() + ic.WorkerReplicas() + 1
	if n := int32(min(len(bm.Hosts), 1<<20)); n < need {
		errs = append(errs, field.Invalid(bp.Child("hosts"), fmt.Sprintf("%d hosts", n),
			fmt.Sprintf("need at least %d: %d masters + %d workers + 1 for the bootstrap node", need, ic.ControlPlaneReplicas(), ic.WorkerReplicas())))
	}
	if masters > 0 && masters < ic.ControlPlaneReplicas() {
		errs = append(errs, field.Invalid(bp.Child("hosts"), fmt.Sprintf("%d with role master", masters),
			fmt.Sprintf("controlPlane.replicas is %d", ic.ControlPlaneReplicas())))
	}
	return append(errs, ic.validateOSImage()...)
}

func (ic *InstallConfig) validateOSImage() field.ErrorList {
	ms := field.NewPath("metalshift")
	if ic.Metalshift == nil || ic.Metalshift.OSImage.URL == "" {
		return field.ErrorList{field.Required(ms.Child("osImage", "url"), "the OS image written to every host")}
	} else if ic.Metalshift.OSImage.Checksum == "" {
		return field.ErrorList{field.Required(ms.Child("osImage", "checksum"), "")}
	}
	return nil
}

// ParseFile reads an install-config file without validating it.
func ParseFile(path string) (*InstallConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}
