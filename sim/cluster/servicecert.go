package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/internal/certs"
)

// OpenShift's service-ca operator, as far as the installed cluster's
// operators need it: a Service annotated with servingCertSecretAnnotation
// gets a serving certificate for <name>.<namespace>.svc in that Secret, and
// a webhook configuration annotated with injectCABundleAnnotation gets the
// CA in every webhook's caBundle. The simulated service CA is the cluster's
// root CA; the certificates it issues hold the cluster's address too, where
// the simulated network reaches the Pods (reachWebhooks).
const (
	servingCertSecretAnnotation = "service.beta.openshift.io/serving-cert-secret-name" //nolint:gosec // an annotation name, no credential
	injectCABundleAnnotation    = "service.beta.openshift.io/inject-cabundle"
)

func (c *Cluster) serviceCA(ctx context.Context) error {
	services := &corev1.ServiceList{}
	if err := c.client.List(ctx, services); err != nil {
		return err
	}
	for _, svc := range services.Items {
		name := svc.Annotations[servingCertSecretAnnotation]
		if name == "" {
			continue
		}
		s := &corev1.Secret{}
		err := c.client.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: name}, s)
		if err == nil || !apierrors.IsNotFound(err) {
			continue
		}
		host := svc.Name + "." + svc.Namespace + ".svc"
		kp, err := certs.Issue(c.files.ca, certs.Spec{CommonName: host, Server: true, DNSNames: []string{host, host + ".cluster.local"},
			IPs: []net.IP{net.ParseIP(c.vip)}})
		if err != nil {
			return err
		}
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name,
			Annotations: map[string]string{"service.beta.openshift.io/originating-service-name": svc.Name}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: kp.Cert, corev1.TLSPrivateKeyKey: kp.Key}}
		if err := c.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the serving certificate of service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
	hooks := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.client.List(ctx, hooks); err != nil {
		return err
	}
	for i := range hooks.Items {
		h := &hooks.Items[i]
		if h.Annotations[injectCABundleAnnotation] != "true" {
			continue
		}
		changed := false
		for j := range h.Webhooks {
			if !bytes.Equal(h.Webhooks[j].ClientConfig.CABundle, c.files.ca.Cert) {
				h.Webhooks[j].ClientConfig.CABundle, changed = c.files.ca.Cert, true
			}
		}
		if changed {
			if err := c.client.Update(ctx, h); err != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("injecting the CA into %s: %w", h.Name, err)
			}
		}
	}
	return nil
}
