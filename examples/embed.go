// Package examples ships the example configurations with the binary.
package examples

import _ "embed"

// Demo is examples/demo.yaml, the configuration of `aegis serve --demo`.
//
//go:embed demo.yaml
var Demo []byte
