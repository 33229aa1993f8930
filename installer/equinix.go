package installer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
)

// EquinixAPIKeyEnv holds the Equinix Metal API key when the install-config
// names no platform.equinixMetal.apiKeyFile (metal-cli's variable).
const EquinixAPIKeyEnv = "METAL_AUTH_TOKEN" //nolint:gosec // the variable's name, not a key

// equinixAPIKey is the API key of the install: from apiKeyFile, else
// $METAL_AUTH_TOKEN.
func equinixAPIKey(em *installconfig.EquinixMetal) (string, error) {
	if em.APIKeyFile != "" {
		data, err := os.ReadFile(em.APIKeyFile)
		if err != nil {
			return "", fmt.Errorf("platform.equinixMetal.apiKeyFile: %w", err)
		}
		if key := strings.TrimSpace(string(data)); key != "" {
			return key, nil
		}
		return "", fmt.Errorf("platform.equinixMetal.apiKeyFile %s is empty", em.APIKeyFile)
	}
	if key := strings.TrimSpace(os.Getenv(EquinixAPIKeyEnv)); key != "" {
		return key, nil
	}
	return "", fmt.Errorf("no Equinix Metal API key: set $%s or platform.equinixMetal.apiKeyFile", EquinixAPIKeyEnv)
}

// EquinixClient is the API client of the install's project.
func EquinixClient(ic *installconfig.InstallConfig) (*metalclient.Client, error) {
	em := ic.Platform.EquinixMetal
	key, err := equinixAPIKey(em)
	if err != nil {
		return nil, err
	}
	return metalclient.New(metalclient.Options{BaseURL: em.APIURL, Token: key, UserAgent: "metalshift-installer"})
}

// equinixClusterTag is the tag of the cluster's devices and addresses: the
// installer's objects put the Cluster in the namespace of its name.
func equinixClusterTag(ic *installconfig.InstallConfig) string {
	return infrav1.EquinixMetalClusterTag(ic.Metadata.Name, ic.Metadata.Name)
}

// reserveEquinixVIPs reserves the cluster's API and ingress elastic IPs,
// tagged as the provider tags them (which then adopts them), unless the
// install-config has them, and writes them into <dir>/install-config.yaml.
// Reservations the project holds with the cluster's tags already (an
// earlier run) are used again.
func reserveEquinixVIPs(ctx context.Context, dir string, ic *installconfig.InstallConfig, raw []byte, out io.Writer) ([]byte, error) {
	em := ic.Platform.EquinixMetal
	if em.APIVIP != "" {
		return raw, nil
	}
	c, err := EquinixClient(ic)
	if err != nil {
		return nil, err
	}
	tag := equinixClusterTag(ic)
	var held []equinixapi.IPReservation
	if err := retried(ctx, func() (err error) {
		held, err = c.ListIPReservations(ctx, em.ProjectID, metalclient.IPFilter{Tag: tag})
		return err
	}); err != nil {
		return nil, fmt.Errorf("listing the project's IP reservations: %w", err)
	}
	addrs := map[string]string{}
	for _, role := range []string{infrav1.EquinixMetalRoleAPI, infrav1.EquinixMetalRoleIngress} {
		roleTag := infrav1.EquinixMetalRoleTagPrefix + role
		i := slices.IndexFunc(held, func(r equinixapi.IPReservation) bool { return slices.Contains(r.Tags, roleTag) })
		var res *equinixapi.IPReservation
		if i >= 0 {
			res = &held[i]
		} else if err := retried(ctx, func() (err error) {
			// A request whose answer was lost made a reservation: it is
			// found by its tags on the next run, and released by destroy.
			res, err = c.RequestIPReservation(ctx, em.ProjectID, equinixapi.IPReservationRequest{
				Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: em.Metro, Facility: em.Facility, Tags: []string{tag, roleTag},
				Details: fmt.Sprintf("The %s address of cluster %s/%s", role, ic.Metadata.Name, ic.Metadata.Name),
			})
			return err
		}); err != nil {
			return nil, fmt.Errorf("reserving the %s address: %w", role, err)
		}
		if res.Address == "" {
			return nil, fmt.Errorf("the %s address (reservation %s) waits for the approval of the project's IP quota; run again once it is approved, or set platform.equinixMetal.apiVIP and ingressVIP", role, res.ID)
		}
		addrs[role] = res.Address
	}
	em.APIVIP, em.IngressVIP = addrs[infrav1.EquinixMetalRoleAPI], addrs[infrav1.EquinixMetalRoleIngress]
	data, err := yaml.Marshal(ic)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, InstallConfigFile), data, 0o600); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "Reserved the API address %s and the ingress address %s (tagged %s); install-config.yaml has them\n", em.APIVIP, em.IngressVIP, tag)
	return data, nil
}

// bindKey reads a BIND key file, which says
//
//	key "<name>" { algorithm <alg>; secret "<base64>"; };
var bindKey = regexp.MustCompile(`key\s+"?([^"\s{]+)"?\s*\{[^}]*?algorithm\s+"?([A-Za-z0-9-]+)"?\s*;[^}]*?secret\s+"([^"]+)"\s*;`)

// tsigKey reads the TSIG key file of platform.equinixMetal.dns: its name,
// algorithm and secret.
func tsigKey(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("platform.equinixMetal.dns.tsigKeyFile: %w", err)
	}
	m := bindKey.FindSubmatch(data)
	if m == nil {
		// The file's content is not quoted: it is a secret.
		return nil, errors.New(`platform.equinixMetal.dns.tsigKeyFile: not a BIND key file (key "<name>" { algorithm <alg>; secret "<base64>"; };)`)
	}
	return map[string]string{infrav1.TSIGKeyNameKey: string(m[1]), infrav1.TSIGAlgorithmKey: string(m[2]), infrav1.TSIGSecretKey: string(m[3])}, nil
}

// equinixObjects are the Equinix Metal platform's hub objects: the
// credentials and TSIG Secrets, the EquinixMetalCluster (its endpoint the
// API elastic IP) and the machine templates.
func equinixObjects(ic *installconfig.InstallConfig, meta func(string) metav1.ObjectMeta, tm func(string, string) metav1.TypeMeta) ([]client.Object, error) {
	em := ic.Platform.EquinixMetal
	name := ic.Metadata.Name
	key, err := equinixAPIKey(em)
	if err != nil {
		return nil, err
	}
	creds := &corev1.Secret{TypeMeta: tm("v1", "Secret"), ObjectMeta: meta(name + "-equinix-credentials"), Type: corev1.SecretTypeOpaque,
		StringData: map[string]string{infrav1.EquinixMetalAPIKeyKey: key}}
	objs := []client.Object{creds}
	infraGV := infrav1.GroupVersion.String()
	emc := &infrav1.EquinixMetalCluster{TypeMeta: tm(infraGV, "EquinixMetalCluster"), ObjectMeta: meta(name), Spec: infrav1.EquinixMetalClusterSpec{
		ProjectID: em.ProjectID, Metro: em.Metro, Facility: em.Facility, CredentialsRef: infrav1.SecretReference{Name: creds.Name},
		APIURL: em.APIURL, MetadataURL: em.MetadataURL, ControlPlaneEndpoint: infrav1.APIEndpoint{Host: em.APIVIP, Port: 6443},
	}}
	if d := em.DNS; d != nil {
		data, err := tsigKey(d.TSIGKeyFile)
		if err != nil {
			return nil, err
		}
		tsig := &corev1.Secret{TypeMeta: tm("v1", "Secret"), ObjectMeta: meta(name + "-tsig"), Type: corev1.SecretTypeOpaque, StringData: data}
		objs = append(objs, tsig)
		emc.Spec.DNS = &infrav1.EquinixMetalDNS{Server: d.Server, Zone: d.Zone, BaseDomain: ic.BaseDomain, TSIGKeyRef: infrav1.SecretReference{Name: tsig.Name}}
	}
	img := ic.Metalshift.OSImage
	pool := em.DefaultMachinePlatform
	template := func(role string) *infrav1.EquinixMetalMachineTemplate {
		t := &infrav1.EquinixMetalMachineTemplate{TypeMeta: tm(infraGV, "EquinixMetalMachineTemplate"), ObjectMeta: meta(name + "-" + role)}
		t.Spec.Template.Spec = infrav1.EquinixMetalMachineSpec{Plan: pool.Plan, HardwareReservationID: pool.HardwareReservationID, Tags: pool.Tags,
			Image: &infrav1.Image{URL: img.URL, Checksum: img.Checksum, ChecksumType: img.ChecksumType}}
		return t
	}
	return append(objs, emc, template("master"), template("worker")), nil
}

// equinixTimeout bounds the installer's calls of the API.
const equinixTimeout = 2 * time.Minute

// retried calls f again while the API answers 5xx or 429, after the
// pause metalclient.Backoff says, until ctx ends.
func retried(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		wait := metalclient.Backoff(err, time.Now())
		if wait == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (and the API kept refusing: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// DestroyEquinix is destroy cluster's last step on Equinix Metal: after
// the provider deleted the cluster's devices and released its addresses
// (and removed its DNS records), it looks in the project for anything
// still tagged with the cluster (a device or an address the hub never
// recorded, say because it was killed in between), deletes it, waits for
// the devices to go, and says what it found.
func DestroyEquinix(ctx context.Context, ic *installconfig.InstallConfig, out io.Writer) error {
	em := ic.Platform.EquinixMetal
	c, err := EquinixClient(ic)
	if err != nil {
		return err
	}
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "%6s  %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	tag := equinixClusterTag(ic)
	var devices []equinixapi.Device
	if err := retried(ctx, func() (err error) {
		devices, err = c.ListDevices(ctx, em.ProjectID, metalclient.DeviceFilter{Tag: tag})
		return err
	}); err != nil {
		return fmt.Errorf("listing the cluster's devices: %w", err)
	}
	for _, d := range devices {
		if d.State == equinixapi.StateDeprovisioning {
			continue
		}
		if err := retried(ctx, func() error { return c.DeleteDevice(ctx, d.ID, true) }); err != nil && !metalclient.IsNotFound(err) {
			return fmt.Errorf("deleting device %s (%s): %w", d.ID, d.Hostname, err)
		}
		say("Deleted device %s (%s), which the hub did not", d.ID, d.Hostname)
	}
	var reservations []equinixapi.IPReservation
	if err := retried(ctx, func() (err error) {
		reservations, err = c.ListIPReservations(ctx, em.ProjectID, metalclient.IPFilter{Tag: tag})
		return err
	}); err != nil {
		return fmt.Errorf("listing the cluster's IP reservations: %w", err)
	}
	for _, r := range reservations {
		for _, a := range r.Assignments {
			if err := retried(ctx, func() error { return c.Unassign(ctx, a.ID) }); err != nil && !metalclient.IsNotFound(err) {
				return fmt.Errorf("unassigning %s: %w", a.Address, err)
			}
		}
		if err := retried(ctx, func() error { return c.ReleaseIPReservation(ctx, r.ID) }); err != nil && !metalclient.IsNotFound(err) {
			return fmt.Errorf("releasing reservation %s (%s): %w", r.ID, r.Address, err)
		}
		say("Released reservation %s (%s), which the hub did not", r.ID, r.Address)
	}
	if err := poll(ctx, func() (bool, error) {
		var left []equinixapi.Device
		err := retried(ctx, func() (err error) {
			left, err = c.ListDevices(ctx, em.ProjectID, metalclient.DeviceFilter{Tag: tag})
			return err
		})
		return len(left) == 0, err
	}); err != nil {
		return fmt.Errorf("waiting for the cluster's devices to go: %w", err)
	}
	say("Nothing tagged %s is left in project %s (%d devices and %d addresses were still there)", tag, em.ProjectID, len(devices), len(reservations))
	return nil
}
