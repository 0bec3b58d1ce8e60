// Pins buildifier (tools/lint.sh builds it from here through the Go module
// proxy). The newest buildtools commit that builds with Go 1.26.
module informer-sidecar/tools/buildifier

go 1.26

require github.com/bazelbuild/buildtools v0.0.0-20260904073137-eaa4d125b423

require (
	github.com/golang/protobuf v1.5.0 // indirect
	github.com/google/safeopen v0.0.0-20260327150837-43626d6f4685 // indirect
	golang.org/x/sys v0.10.0 // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)
