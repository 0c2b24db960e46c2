//go:build race

package file_test

// raceEnabled reports whether the race detector is on (it slows large tests).
const raceEnabled = true
