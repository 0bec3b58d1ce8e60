//go:build tools

// Package tools records the build tools this module pins, so that
// `go mod tidy` keeps them and their dependencies in go.sum.
package tools

import _ "github.com/bazelbuild/buildtools/buildifier"
