module github.com/execfsm/execfsm/admin

go 1.25.0

require (
	github.com/execfsm/execfsm v0.1.0
	github.com/goccy/go-graphviz v0.2.10
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/disintegration/imaging v1.6.2 // indirect
	github.com/flopp/go-findfont v0.1.0 // indirect
	github.com/fogleman/gg v1.3.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/tetratelabs/wazero v1.10.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/image v0.21.0 // indirect
	golang.org/x/text v0.19.0 // indirect
)

// The sibling modules, from this repository: `go doc`, `go build` and
// `go test` work here with GOWORK=off. Go ignores a dependency's
// replaces, so users get the released versions required above.
replace github.com/execfsm/execfsm => ..
