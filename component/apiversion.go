package component

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/contract"
)

// contractLabels are the CRD labels that name the API versions of a provider
// kind per Cluster API contract, newest contract first.
var contractLabels = []string{clusterv1.GroupVersion.String(), "cluster.x-k8s.io/v1beta1"}

// apiVersionFor returns the newest apiVersion of gk that a Cluster API
// contract label on its CRD names, e.g. "infrastructure.cluster.x-k8s.io/v1alpha1".
// The conversion webhooks use it to rewrite references in old API versions.
func apiVersionFor(ctx context.Context, c client.Reader, gk schema.GroupKind) (string, error) {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := c.Get(ctx, client.ObjectKey{Name: contract.CalculateCRDName(gk.Group, gk.Kind)}, crd); err != nil {
		return "", fmt.Errorf("reading the CRD of %s: %w", gk, err)
	}
	v, err := newestContractVersion(crd.GetLabels())
	if err != nil {
		return "", fmt.Errorf("CRD of %s: %w", gk, err)
	}
	return schema.GroupVersion{Group: gk.Group, Version: v}.String(), nil
}

// newestContractVersion picks the newest version listed (separated by "_")
// under the newest contract label present.
func newestContractVersion(labels map[string]string) (string, error) {
	for _, l := range contractLabels {
		value := labels[l]
		if value == "" {
			continue
		}
		newest := ""
		for _, v := range strings.Split(value, "_") {
			if newest == "" || version.CompareKubeAwareVersionStrings(v, newest) > 0 {
				newest = v
			}
		}
		return newest, nil
	}
	return "", fmt.Errorf("no %s label names its API versions", strings.Join(contractLabels, " or "))
}
