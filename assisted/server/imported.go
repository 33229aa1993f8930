package server

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/installstate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// RootCAConfigMap is where an OpenShift cluster keeps the root CA its
// machine-config-server's certificate is signed with (openshift-install's
// kube-system/root-ca, key ca.crt; the machine-config operator reads it
// for the same pointer Ignition).
var RootCAConfigMap = types.NamespacedName{Namespace: "kube-system", Name: "root-ca"}

// importedIgnition is the Ignition of a host added to an imported cluster:
// the service made none of its secrets, so the host gets a pointer to the
// cluster's machine-config-server, trusted with the root CA read from the
// cluster itself through its admin kubeconfig.
func (s *Server) importedIgnition(ctx context.Context, c *record.Cluster, a *agentinstallv1.Agent, role string) ([]byte, error) {
	if !record.Imported(c.CD, nil) {
		return nil, errors.New("the cluster's installation has not started")
	}
	if role != record.Role(a) {
		return nil, fmt.Errorf("the host's role is %s, not %s", record.Role(a), role)
	}
	kc, err := record.AdminKubeconfig(ctx, s.opts.Client, c.CD, nil)
	if err != nil {
		return nil, err
	}
	ca, err := ImportedRootCA(ctx, kc)
	if err != nil {
		return nil, err
	}
	var override []byte
	if a.Spec.IgnitionConfigOverrides != "" {
		override = []byte(a.Spec.IgnitionConfigOverrides)
	}
	return installstate.PointerIgnition(c.CD.Spec.ClusterName+"."+c.CD.Spec.BaseDomain, role, ca, override)
}

// ImportedRootCA is the root CA of an installed cluster the service did
// not install: its ConfigMap kube-system/root-ca, else (a cluster without
// it, or an admin not allowed to read it) the certificate-authority-data
// of its admin kubeconfig, which on clusters whose API and
// machine-config-server share the root CA is the same certificate.
func ImportedRootCA(ctx context.Context, kubeconfig []byte) ([]byte, error) {
	cfg, err := record.SpokeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	spoke, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	err = spoke.Get(ctx, RootCAConfigMap, cm)
	switch {
	case err == nil && cm.Data["ca.crt"] != "":
		return []byte(cm.Data["ca.crt"]), nil
	case err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err):
		return nil, fmt.Errorf("reading the imported cluster's root CA: %w", err)
	case len(cfg.CAData) > 0:
		return cfg.CAData, nil
	}
	return nil, fmt.Errorf("the imported cluster's root CA is unknown: no ConfigMap %s (key ca.crt) and no certificate-authority-data in its admin kubeconfig", RootCAConfigMap)
}
