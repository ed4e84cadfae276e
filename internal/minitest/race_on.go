//go:build race

package minitest

// raceEnabled: this test binary runs with the race detector, and so does
// the minictl it builds.
const raceEnabled = true
