// Package archtest holds the test that keeps the layers of docs/architecture.md
// honest: it fails when a package imports across a forbidden edge.
package archtest
