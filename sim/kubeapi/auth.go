package kubeapi

import (
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Users and groups the policy knows, as kube-apiserver names them.
const (
	mastersGroup       = "system:masters"
	bootstrappersGroup = "system:bootstrappers"
	nodesGroup         = "system:nodes"
	authenticatedGroup = "system:authenticated"
	bootstrapUser      = "system:bootstrap:"
	bootstrapTokenType = "bootstrap.kubernetes.io/token" //nolint:gosec // a Secret type, not a credential
)

// user is an authenticated client.
type user struct {
	name   string
	groups []string
}

func (u *user) in(group string) bool { return slices.Contains(u.groups, group) }

// authenticate returns the request's user: from its verified client
// certificate, else its bootstrap token; nil for an anonymous request,
// false for bad credentials. The caller holds the server's read lock.
func (s *Server) authenticate(r *http.Request) (*user, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		u := s.bootstrapToken(strings.TrimSpace(tok))
		return u, u != nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		c := r.TLS.VerifiedChains[0][0]
		return &user{name: c.Subject.CommonName, groups: append(slices.Clone(c.Subject.Organization), authenticatedGroup)}, true
	}
	return nil, true
}

// bootstrapToken checks "<id>.<secret>" against kube-system's
// bootstrap-token-<id> Secret, as kube-apiserver's bootstrap token
// authenticator does.
func (s *Server) bootstrapToken(tok string) *user {
	id, secret, ok := strings.Cut(tok, ".")
	if !ok || len(id) != 6 || len(secret) != 16 {
		return nil
	}
	o := s.store.get(secretsGR, metav1.NamespaceSystem, "bootstrap-token-"+id)
	if o == nil || o.obj["type"] != bootstrapTokenType {
		return nil
	}
	data, _ := o.obj["data"].(map[string]any)
	field := func(k string) string {
		v, _ := data[k].(string)
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	if subtle.ConstantTimeCompare([]byte(field("token-secret")), []byte(secret)) != 1 || field("usage-bootstrap-authentication") != "true" {
		return nil
	}
	if exp := field("expiration"); exp != "" {
		if t, err := time.Parse(time.RFC3339, exp); err != nil || time.Now().After(t) {
			return nil
		}
	}
	u := &user{name: bootstrapUser + id, groups: []string{bootstrappersGroup, authenticatedGroup}}
	for _, g := range strings.Split(field("auth-extra-groups"), ",") {
		if g = strings.TrimSpace(g); strings.HasPrefix(g, "system:bootstrappers:") {
			u.groups = append(u.groups, g)
		}
	}
	return u
}

// allowed is the authorization policy (see the package documentation).
func allowed(u *user, req *apiRequest) bool {
	if u.in(mastersGroup) {
		return true
	}
	gr := req.res.gvr.GroupResource()
	asks := gr == csrsGR && req.sub == "" && slices.Contains([]string{"create", "get", "list", "watch"}, req.verb)
	switch {
	case u.in(nodesGroup):
		switch gr.String() {
		case "nodes", "leases.coordination.k8s.io", "events":
			return req.sub == "" || req.sub == "status"
		}
		return asks
	case u.in(bootstrappersGroup):
		return asks
	}
	return false
}
