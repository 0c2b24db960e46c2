// Package layering holds the test that keeps oncesync's import graph in
// layers (docs/ARCHITECTURE.md): the foundation packages import nothing of
// oncesync above them, the store drivers only the store, connectors no engine,
// and only the wiring opens a store driver. It has no code of its own.
package layering
