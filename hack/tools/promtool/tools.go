//go:build tools

// Package tools records the main package built from this module so that
// `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
