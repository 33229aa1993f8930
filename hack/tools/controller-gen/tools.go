//go:build tools

// Package controllergen pins controller-gen; it is never imported.
package controllergen

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
