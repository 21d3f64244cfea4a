// Package infra holds what the SAM template does not: checks of
// template.yaml (cfn-lint, and the rules the template's comments state,
// pinned by tests), and later dashboards and local-stack helpers.
package infra
