package kubeconfig

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrRefused matches (errors.Is) every refusal of Load and Sanitize: the
// kubeconfig asks for something the hub does not do on its writer's
// behalf. Other errors say it is not a usable kubeconfig at all.
var ErrRefused = errors.New("kubeconfig refused")

// RefusedError lists what a kubeconfig was refused for, each item naming
// the field as written in the kubeconfig (users[admin].user.exec ...).
type RefusedError struct {
	Refused []string
}

func (e *RefusedError) Error() string {
	return "the kubeconfig is refused: " + strings.Join(e.Refused, "; ")
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Why the fields are refused, for the messages.
const (
	whyExec         = "an exec plugin would run a command in the hub's process"
	whyAuthProvider = "an auth provider plugin would run in the hub's process"
	whyFile         = "a file path would read one of the hub's files; give the %s inline (%s)"
	whyProxy        = "the hub does not connect through a proxy a kubeconfig names"
	whyInsecure     = "the server's certificate must be verified; give its CA inline (certificate-authority-data)"
	whyImpersonate  = "impersonation is not supported"
	whyBasicAuth    = "basic authentication is not supported; use a token or a client certificate"
)

// Load returns the client configuration of data's current context, built
// from its inline fields alone, or an error matching ErrRefused that names
// every refused field of that context's cluster and user. Other contexts
// are not looked at: nothing of them is used.
func Load(data []byte) (*rest.Config, error) {
	cluster, user, err := current(data)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{
		Host:               cluster.Server,
		BearerToken:        user.Token,
		DisableCompression: cluster.DisableCompression,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: cluster.TLSServerName,
			CAData:     cluster.CertificateAuthorityData,
			CertData:   user.ClientCertificateData,
			KeyData:    user.ClientKeyData,
		},
	}
	return cfg, nil
}

// Sanitize returns data reduced to its current context, with the same
// checks as Load: a kubeconfig that any loader (client-go's among them)
// reads as Load would. It is for code that takes kubeconfig bytes rather
// than a client configuration, such as Cluster API's ClusterCache.
func Sanitize(data []byte) ([]byte, error) {
	cluster, user, err := current(data)
	if err != nil {
		return nil, err
	}
	out := clientcmdapi.NewConfig()
	out.Clusters["cluster"] = &clientcmdapi.Cluster{
		Server: cluster.Server, TLSServerName: cluster.TLSServerName, DisableCompression: cluster.DisableCompression,
		CertificateAuthorityData: cluster.CertificateAuthorityData,
	}
	out.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: user.ClientCertificateData, ClientKeyData: user.ClientKeyData, Token: user.Token,
	}
	out.Contexts["context"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	out.CurrentContext = "context"
	return clientcmd.Write(*out)
}

// current parses data and returns its current context's cluster and user,
// checked.
func current(data []byte) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, nil, fmt.Errorf("the kubeconfig cannot be read: %w", err)
	}
	if cfg.CurrentContext == "" {
		return nil, nil, errors.New("the kubeconfig has no current-context")
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return nil, nil, fmt.Errorf("the kubeconfig's current-context %q is not one of its contexts", cfg.CurrentContext)
	}
	cluster := cfg.Clusters[ctx.Cluster]
	if cluster == nil {
		return nil, nil, fmt.Errorf("the kubeconfig's context %q names cluster %q, which it does not have", cfg.CurrentContext, ctx.Cluster)
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	if user == nil {
		if ctx.AuthInfo != "" {
			return nil, nil, fmt.Errorf("the kubeconfig's context %q names user %q, which it does not have", cfg.CurrentContext, ctx.AuthInfo)
		}
		user = &clientcmdapi.AuthInfo{}
	}
	refused := append(checkCluster("clusters["+ctx.Cluster+"].cluster.", cluster), checkUser("users["+ctx.AuthInfo+"].user.", user)...)
	if len(refused) > 0 {
		return nil, nil, &RefusedError{Refused: refused}
	}
	if err := checkServer(cluster.Server); err != nil {
		return nil, nil, fmt.Errorf("clusters[%s].cluster.server: %w", ctx.Cluster, err)
	}
	if (len(user.ClientCertificateData) == 0) != (len(user.ClientKeyData) == 0) {
		return nil, nil, fmt.Errorf("users[%s].user: client-certificate-data and client-key-data go together", ctx.AuthInfo)
	}
	return cluster, user, nil
}

// checkCluster lists what is refused in a cluster entry; at is its path.
func checkCluster(at string, c *clientcmdapi.Cluster) []string {
	var out []string
	if c.CertificateAuthority != "" {
		out = append(out, at+"certificate-authority: "+fmt.Sprintf(whyFile, "CA certificate", "certificate-authority-data"))
	}
	if c.InsecureSkipTLSVerify {
		out = append(out, at+"insecure-skip-tls-verify: "+whyInsecure)
	}
	if c.ProxyURL != "" {
		out = append(out, at+"proxy-url: "+whyProxy)
	}
	return out
}

// checkUser lists what is refused in a user entry; at is its path.
func checkUser(at string, u *clientcmdapi.AuthInfo) []string {
	var out []string
	if u.Exec != nil {
		out = append(out, at+"exec: "+whyExec)
	}
	if u.AuthProvider != nil {
		out = append(out, at+"auth-provider: "+whyAuthProvider)
	}
	if u.TokenFile != "" {
		out = append(out, at+"tokenFile: "+fmt.Sprintf(whyFile, "token", "token"))
	}
	if u.ClientCertificate != "" {
		out = append(out, at+"client-certificate: "+fmt.Sprintf(whyFile, "client certificate", "client-certificate-data"))
	}
	if u.ClientKey != "" {
		out = append(out, at+"client-key: "+fmt.Sprintf(whyFile, "client key", "client-key-data"))
	}
	if u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0 {
		out = append(out, at+"as: "+whyImpersonate)
	}
	if u.Username != "" || u.Password != "" {
		out = append(out, at+"username/password: "+whyBasicAuth)
	}
	return out
}

// checkServer accepts an https URL naming a host, without credentials.
func checkServer(server string) error {
	if server == "" {
		return errors.New("missing: the cluster's API URL, as in https://api.example.com:6443")
	}
	u, err := url.Parse(server)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "https":
		return fmt.Errorf("must be an https URL, not %s", u.Scheme)
	case u.Host == "":
		return errors.New("must name a host, as in https://api.example.com:6443")
	case u.User != nil:
		return errors.New("must not carry a username or password")
	}
	return nil
}
