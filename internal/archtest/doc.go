// Package archtest holds the tests that keep the layers of docs/architecture.md
// honest: the floors read from the folders and no import, in code or in tests,
// runs up one (layers_test.go); every import is one the table allows
// (imports_test.go); and the table in docs/architecture.md is the one the
// tests hold (table_test.go, -update rewrites it).
package archtest
