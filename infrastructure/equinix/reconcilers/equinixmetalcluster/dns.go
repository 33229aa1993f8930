package equinixmetalcluster

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/rfc2136"
)

// recordTTL is the TTL of the records the provider writes: short, as the
// API address may move.
const recordTTL = 60

func setDNS(emc *infrav1.EquinixMetalCluster, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(emc, metav1.Condition{Type: infrav1.DNSRecordsReadyCondition, Status: status, Reason: reason, Message: msg})
}

// dnsServer is the server spec.dns names, with the TSIG key of its Secret.
func (r *Reconciler) dnsServer(ctx context.Context, emc *infrav1.EquinixMetalCluster) (rfc2136.Server, error) {
	d := emc.Spec.DNS
	s := &corev1.Secret{}
	name := d.TSIGKeyRef.Name
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: emc.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return rfc2136.Server{}, fmt.Errorf("the TSIG key Secret %s (spec.dns.tsigKeyRef) does not exist", name)
		}
		return rfc2136.Server{}, err
	}
	key := &rfc2136.Key{Name: string(s.Data[infrav1.TSIGKeyNameKey]), Algorithm: string(s.Data[infrav1.TSIGAlgorithmKey]),
		Secret: strings.TrimSpace(string(s.Data[infrav1.TSIGSecretKey]))}
	if key.Name == "" || key.Secret == "" {
		return rfc2136.Server{}, fmt.Errorf("the TSIG key Secret %s (spec.dns.tsigKeyRef) needs the keys %s and %s", name, infrav1.TSIGKeyNameKey, infrav1.TSIGSecretKey)
	}
	return rfc2136.Server{Address: d.Server, Zone: d.Zone, Key: key}, nil
}

// clusterName is the name of the cluster's records: its Cluster's.
func clusterName(emc *infrav1.EquinixMetalCluster, cluster string) string {
	if cluster != "" {
		return cluster
	}
	if n := emc.Labels["cluster.x-k8s.io/cluster-name"]; n != "" {
		return n
	}
	return emc.Name
}

func baseDomain(d *infrav1.EquinixMetalDNS) string {
	if d.BaseDomain != "" {
		return d.BaseDomain
	}
	return d.Zone
}

// ensureDNS writes the records of the API and the ingress, unless the
// condition says the same records are written; it tells whether they are.
func (r *Reconciler) ensureDNS(ctx context.Context, emc *infrav1.EquinixMetalCluster, cluster string) bool {
	d := emc.Spec.DNS
	if d == nil {
		setDNS(emc, metav1.ConditionTrue, infrav1.DNSNotConfiguredReason, "spec.dns is empty: the records of the API and the ingress are the user's to write")
		return true
	}
	api, err1 := netip.ParseAddr(emc.Status.APIIP.Address)
	ingress, err2 := netip.ParseAddr(emc.Status.IngressIP.Address)
	if err1 != nil || err2 != nil {
		setDNS(emc, metav1.ConditionFalse, infrav1.DNSUpdateFailedReason, "The elastic IPs are not addresses")
		return false
	}
	records := rfc2136.ClusterRecords(clusterName(emc, cluster), baseDomain(d), api, ingress, recordTTL)
	msg := fmt.Sprintf("%s and %s at %s, %s at %s, on %s", records[0].Name, records[1].Name, api, records[2].Name, ingress, d.Server)
	if c := conditions.Get(emc, infrav1.DNSRecordsReadyCondition); c != nil && c.Status == metav1.ConditionTrue && c.Message == msg {
		return true
	}
	s, err := r.dnsServer(ctx, emc)
	if err == nil {
		err = s.Ensure(ctx, records)
	}
	if err != nil {
		setDNS(emc, metav1.ConditionFalse, infrav1.DNSUpdateFailedReason, err.Error())
		return false
	}
	r.Recorder.Eventf(emc, nil, corev1.EventTypeNormal, infrav1.DNSRecordsWrittenReason, "UpdateDNS", "Wrote %s", msg)
	setDNS(emc, metav1.ConditionTrue, infrav1.DNSRecordsWrittenReason, msg)
	return true
}

// removeDNS removes the records of the API and the ingress.
func (r *Reconciler) removeDNS(ctx context.Context, emc *infrav1.EquinixMetalCluster, cluster string) error {
	d := emc.Spec.DNS
	if d == nil {
		return nil
	}
	s, err := r.dnsServer(ctx, emc)
	if err != nil {
		return err
	}
	var names []string
	for _, rec := range rfc2136.ClusterRecords(clusterName(emc, cluster), baseDomain(d), netip.IPv4Unspecified(), netip.IPv4Unspecified(), recordTTL) {
		names = append(names, rec.Name)
	}
	if err := s.Remove(ctx, names); err != nil {
		return err
	}
	r.Recorder.Eventf(emc, nil, corev1.EventTypeNormal, "DNSRecordsRemoved", "UpdateDNS", "Removed %s from %s", strings.Join(names, ", "), d.Server)
	return nil
}
