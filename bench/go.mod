module github.com/execfsm/execfsm/bench

go 1.23.0

require (
	github.com/execfsm/execfsm v0.1.0
	github.com/looplab/fsm v1.0.3
	github.com/qmuntal/stateless v1.7.2
	github.com/stretchr/testify v1.12.1
	pgregory.net/rapid v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
