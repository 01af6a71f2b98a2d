module github.com/execfsm/execfsm/bench

go 1.26.0

require (
	github.com/execfsm/execfsm v0.1.0
	github.com/looplab/fsm v1.0.3
	github.com/qmuntal/stateless v1.7.2
	github.com/stretchr/testify v1.12.1
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da
	k8s.io/client-go v0.37.2
	pgregory.net/rapid v1.3.0
)

require (
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/time v0.15.0 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/utils v0.0.0-20260626114624-be93311217bd // indirect
)

// The sibling modules, from this repository: `go doc`, `go build` and
// `go test` work here with GOWORK=off. Go ignores a dependency's
// replaces, so users get the released versions required above.
replace github.com/execfsm/execfsm => ..
