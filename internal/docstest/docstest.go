// Package docstest holds the tests that keep the documentation true to the
// tree: every repository path README.md and docs/*.md name, and every path
// and source file a code comment names, exists.
package docstest
