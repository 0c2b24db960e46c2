// Package e2e holds oncesync's end-to-end tests: the real binary, run as a
// user would, against a real SQLite store and the fake Brevo, killed with
// real signals. It has no non-test code.
package e2e
