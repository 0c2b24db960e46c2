//go:build !race

package fakebrevo

// raceEnabled scales heavy tests down under the race detector.
const raceEnabled = false
