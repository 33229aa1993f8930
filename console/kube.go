package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// newScheme holds the kinds the console reads and writes.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		authenticationv1.AddToScheme, corev1.AddToScheme, clusterv1.AddToScheme, agentinstallv1.AddToScheme,
		hiveextv1.AddToScheme, hivev1.AddToScheme, metal3v1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// newMapper maps the console's kinds to their resources without asking
// the API server: a user's client needs no discovery, and nothing is
// read with other credentials to build it.
func newMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		clusterv1.GroupVersion.WithKind("Cluster"),
		clusterv1.GroupVersion.WithKind("Machine"),
		agentinstallv1.GroupVersion.WithKind("Agent"),
		agentinstallv1.GroupVersion.WithKind("InfraEnv"),
		agentinstallv1.GroupVersion.WithKind("NMStateConfig"),
		corev1.SchemeGroupVersion.WithKind("Event"),
		corev1.SchemeGroupVersion.WithKind("Secret"),
		hiveextv1.GroupVersion.WithKind("AgentClusterInstall"),
		hivev1.GroupVersion.WithKind("ClusterDeployment"),
		metal3v1.GroupVersion.WithKind("BareMetalHost"),
	} {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	m.Add(authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"), meta.RESTScopeRoot)
	return m
}

// userConfig is base (the API server's address and CA) with none of its
// credentials, authenticating with token.
func userConfig(base *rest.Config, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = token
	cfg.UserAgent = "metalshift-console"
	return cfg
}

// errUnauthenticated is a token the API server does not accept.
var errUnauthenticated = errors.New("the API server did not accept this token")

// signIn builds the client of token's user and asks the API server who
// that is (a SelfSubjectReview, which every authenticated user may make).
func (s *Server) signIn(ctx context.Context, token string) (string, client.WithWatch, error) {
	c, err := client.NewWithWatch(userConfig(s.base, token), client.Options{Scheme: s.scheme, Mapper: s.mapper})
	if err != nil {
		return "", nil, err
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		if apierrors.IsUnauthorized(err) {
			return "", nil, errUnauthenticated
		}
		return "", nil, fmt.Errorf("asking the API server who the token's user is: %w", err)
	}
	return review.Status.UserInfo.Username, c, nil
}

// apiStatus is the HTTP status and message of an API error, for the
// browser: 403 stays 403, with the API server's reason.
func apiStatus(err error) (int, string) {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		if st.Code != 0 {
			return int(st.Code), st.Message
		}
	}
	return http.StatusBadGateway, "The API server could not be reached"
}
