//go:build tools

// Package golangcilint pins golangci-lint; it is never imported.
package golangcilint

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
