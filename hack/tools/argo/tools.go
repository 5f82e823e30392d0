//go:build tools

// Package tools records the main packages built from this module so that
// `go mod tidy` keeps their dependencies. argoexec (Argo's executor, for the
// executor image) is pinned here too: it must match the controller exactly.
package tools

import (
	_ "github.com/argoproj/argo-workflows/v3/cmd/argo"
	_ "github.com/argoproj/argo-workflows/v3/cmd/argoexec"
	_ "github.com/argoproj/argo-workflows/v3/cmd/workflow-controller"
)
