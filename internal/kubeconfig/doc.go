// Package kubeconfig loads kubeconfigs that someone other than the hub's
// operator wrote — an imported cluster's admin kubeconfig, a Cluster's
// <cluster>-kubeconfig Secret — into client configurations that hold only
// what is written inline: the server's https URL, its CA certificate, a
// client certificate and key, a bearer token.
//
// Everything else a kubeconfig can ask of the program that loads it is
// refused, by name: exec plugins and auth providers (they run code in the
// hub's process), file paths (certificate-authority, client-certificate,
// client-key, tokenFile: they would read the hub's files, such as its
// service account token or signing key, and send them to a server the
// writer chose), a proxy, impersonation, basic authentication, and
// insecure-skip-tls-verify.
//
// The package parses and checks; it must not read files, run commands or
// connect anywhere. Never load such a kubeconfig with client-go's
// clientcmd loaders (RESTConfigFromKubeConfig, BuildConfigFromFlags):
// they honour all of the above.
package kubeconfig
