package mcp

// fb formats bytes as the answers do, for the tests' expectations.
var FormatBytes = fb
