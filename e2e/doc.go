// Package e2e holds the end-to-end tests (build tag e2e); see framework_test.go.
package e2e
