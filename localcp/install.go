package localcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/config"
)

// Names of the webhook configurations the hub registers.
const (
	capiMutatingWebhooks   = "metalshift-capi-mutating"
	capiValidatingWebhooks = "metalshift-capi-validating"
	ownMutatingWebhooks    = "metalshift-mutating"
	ownValidatingWebhooks  = "metalshift-validating"
)

// OwnValidatingWebhooks names the ValidatingWebhookConfiguration of
// metalshift's own validating webhooks (those of its API groups).
const OwnValidatingWebhooks = ownValidatingWebhooks

// InstallCRDs creates or updates crds and waits until they are
// established. Those with more than one version (Cluster API's) get their
// conversion webhook pointed at webhookURL; an empty webhookURL leaves
// conversion off.
func InstallCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, webhookURL string, caBundle []byte) error {
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if webhookURL != "" {
			setConversionWebhook(crd, webhookURL, caBundle)
		}
		if err := createOrReplace(ctx, c, crd); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, c, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

func setConversionWebhook(crd *apiextensionsv1.CustomResourceDefinition, webhookURL string, caBundle []byte) {
	if len(crd.Spec.Versions) < 2 {
		return
	}
	url := webhookURL + "/convert"
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			ConversionReviewVersions: []string{"v1", "v1beta1"},
		},
	}
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s was not established: %w", name, err)
	}
	return nil
}

// RegisterWebhooks creates or updates the admission webhook configurations
// of the hub (Cluster API's and metalshift's own), calling the webhook
// server at webhookURL with the given CA.
func RegisterWebhooks(ctx context.Context, cfg *rest.Config, webhookURL string, caBundle []byte) error {
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	mutating, validating, err := config.CAPIWebhooks()
	if err != nil {
		return err
	}
	ownMutating, ownValidating, err := config.OwnWebhooks()
	if err != nil {
		return err
	}
	m := mergeMutating(capiMutatingWebhooks, mutating)
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = clientConfig(m.Webhooks[i].ClientConfig, webhookURL, caBundle)
	}
	v := mergeValidating(capiValidatingWebhooks, validating)
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = clientConfig(v.Webhooks[i].ClientConfig, webhookURL, caBundle)
	}
	objs := []client.Object{m, v}
	if len(ownMutating) > 0 {
		om := mergeMutating(ownMutatingWebhooks, ownMutating)
		for i := range om.Webhooks {
			om.Webhooks[i].ClientConfig = clientConfig(om.Webhooks[i].ClientConfig, webhookURL, caBundle)
		}
		objs = append(objs, om)
	}
	ov := mergeValidating(ownValidatingWebhooks, ownValidating)
	for i := range ov.Webhooks {
		ov.Webhooks[i].ClientConfig = clientConfig(ov.Webhooks[i].ClientConfig, webhookURL, caBundle)
	}
	objs = append(objs, ov)
	for _, obj := range objs {
		if err := createOrReplace(ctx, c, obj); err != nil {
			return fmt.Errorf("registering %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// clientConfig turns an in-cluster Service reference into a URL on the
// loopback webhook server, keeping the path.
func clientConfig(in admissionregistrationv1.WebhookClientConfig, webhookURL string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if in.Service != nil && in.Service.Path != nil {
		path = *in.Service.Path
	}
	url := strings.TrimSuffix(webhookURL, "/") + path
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
}

func mergeMutating(name string, in []*admissionregistrationv1.MutatingWebhookConfiguration) *admissionregistrationv1.MutatingWebhookConfiguration {
	out := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range in {
		out.Webhooks = append(out.Webhooks, c.Webhooks...)
	}
	return out
}

func mergeValidating(name string, in []*admissionregistrationv1.ValidatingWebhookConfiguration) *admissionregistrationv1.ValidatingWebhookConfiguration {
	out := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range in {
		out.Webhooks = append(out.Webhooks, c.Webhooks...)
	}
	return out
}

// createOrReplace creates obj or replaces the object of the same name.
func createOrReplace(ctx context.Context, c client.Client, obj client.Object) error {
	existing, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not a client.Object", obj)
	}
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, obj)
}

// newClient returns a client for the kinds the installer writes.
func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := admissionregistrationv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
