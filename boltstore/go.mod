module github.com/execfsm/execfsm/boltstore

go 1.25.0

require (
	github.com/execfsm/execfsm v0.1.0
	github.com/stretchr/testify v1.12.1
	go.etcd.io/bbolt v1.4.3
	go.uber.org/goleak v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.29.0 // indirect
)

// The sibling modules, from this repository: `go doc`, `go build` and
// `go test` work here with GOWORK=off. Go ignores a dependency's
// replaces, so users get the released versions required above.
replace github.com/execfsm/execfsm => ..
