module github.com/execfsm/execfsm/examples

go 1.23

require (
	github.com/execfsm/execfsm v0.0.0
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

// The examples are developed against the core module in this repository;
// the committed go.work ties them together and this keeps them building
// without it.
replace github.com/execfsm/execfsm => ../
